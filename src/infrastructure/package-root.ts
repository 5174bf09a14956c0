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
