import * as fs from 'node:fs';
import * as path from 'node:path';

const ROOT = path.join(__dirname, '../..');

/**
 * The pages a user reads: the README and docs/ (with docs/usage/). The
 * performance pages are records of measurements, not promises about the
 * code, and are left out.
 */
export function userDocs(): { file: string; text: string }[] {
  const docs = (dir: string) =>
    fs
      .readdirSync(path.join(ROOT, dir))
      .filter((f) => f.endsWith('.md') && !f.startsWith('performance'))
      .map((f) => path.join(dir, f));
  return ['README.md', ...docs('docs'), ...docs('docs/usage')].map((file) => ({
    file,
    text: fs.readFileSync(path.join(ROOT, file), 'utf8'),
  }));
}

/** Every piece of code in a page: each line of a fenced block (indented in a list too) and each inline `span`. */
export function codeIn(text: string): string[] {
  const pieces: string[] = [];
  const prose = text.replace(/^ *```[^\n]*\n([\s\S]*?)^ *```$/gm, (_block, body: string) => {
    pieces.push(...body.split('\n'));
    return '';
  });
  for (const m of prose.matchAll(/`([^`\n]+)`/g)) pieces.push(m[1]);
  return pieces;
}

/** The source files of the product (no specs), relative to the repository. */
export function productSources(dir = 'src'): string[] {
  return fs
    .readdirSync(path.join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts') && !/\.(spec|int-spec|e2e-spec)\.ts$/.test(f))
    .map((f) => path.join(dir, f));
}

export function readSource(file: string): string {
  return fs.readFileSync(path.join(ROOT, file), 'utf8');
}
