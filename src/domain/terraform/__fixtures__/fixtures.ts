import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** Reads a fixture written by terraform itself (see README.md). */
export function fixtureText(name: string): string {
  return readFileSync(join(__dirname, name), 'utf8');
}

export function fixtureLines(name: string): string[] {
  return fixtureText(name)
    .split('\n')
    .filter((l) => l !== '');
}
