import * as fs from 'node:fs';
import * as path from 'node:path';

/** The folder holding package.json, whether we run from src/ (tests) or dist/. */
export function packageRoot(): string {
  let dir = __dirname;
  while (!fs.existsSync(path.join(dir, 'package.json'))) {
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error(`package.json not found above ${__dirname}`);
    dir = parent;
  }
  return dir;
}

/** The version in package.json: kl's and kld's (`kl version`, `kld --version`, /healthz, OpenAPI). */
export function packageVersion(): string {
  const file = path.join(packageRoot(), 'package.json');
  return (JSON.parse(fs.readFileSync(file, 'utf8')) as { version: string }).version;
}
