import { createHash } from 'node:crypto';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { HclUnit } from '../../domain/apply/config-scope';

/**
 * What the HCL reader found in a file's text, kept on this machine's disk so
 * that reading an unchanged configuration needs neither the grammar's
 * WebAssembly nor a parse (`kl plan` reads it on every run, and its
 * workspace's locals again after terraform).
 *
 * An entry is named by the SHA-256 of the reader's identity and the file's
 * whole text, so an edited file is a different entry and an entry can only
 * ever be what that reader made of that exact text: nothing needs to be
 * invalidated. The identity (`readerIdentity`) covers the code that turns
 * text into units: the grammar, the tree-sitter runtime and the reader
 * module itself. Like every cache here, a failure is only a miss.
 */
export interface HclUnitsCache {
  get(text: string): Promise<HclUnit[] | null>;
  put(text: string, units: HclUnit[]): Promise<void>;
}

interface Entry {
  length: number;
  units: HclUnit[];
}

export class FileHclUnitsCache implements HclUnitsCache {
  /** @param identity what produced the units: a different reader never sees them. */
  constructor(
    private readonly dir: string,
    private readonly identity: () => string,
  ) {}

  async get(text: string): Promise<HclUnit[] | null> {
    try {
      const entry = JSON.parse(await fs.readFile(this.file(text), 'utf8')) as Entry;
      return entry.length === text.length && Array.isArray(entry.units) ? entry.units : null;
    } catch {
      return null;
    }
  }

  async put(text: string, units: HclUnit[]): Promise<void> {
    // Write then rename, so a concurrent reader never sees half an entry.
    let tmp: string | null = null;
    try {
      const file = this.file(text);
      tmp = `${file}.${process.pid}.tmp`;
      await fs.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
      const entry: Entry = { length: text.length, units };
      await fs.writeFile(tmp, JSON.stringify(entry), { mode: 0o600 });
      await fs.rename(tmp, file);
    } catch {
      if (tmp !== null) await fs.rm(tmp, { force: true }).catch(() => undefined);
    }
  }

  private file(text: string): string {
    const key = createHash('sha256')
      .update(this.identity())
      .update('\0')
      .update(text)
      .digest('hex');
    return path.join(this.dir, 'hcl-units', key.slice(0, 2), `${key}.json`);
  }
}

/** The SHA-256 of files' bytes, in order: what a cache entry's producer was. */
export function identityOf(files: readonly string[], read: (f: string) => Buffer): string {
  const hash = createHash('sha256');
  for (const f of files) hash.update(read(f)).update('\0');
  return hash.digest('hex');
}
