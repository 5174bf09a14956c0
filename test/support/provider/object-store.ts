import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The "remote API" of the test provider: one pretty-printed cty-JSON file per
 * object, so a test can change or delete an object behind Terraform's back.
 */
export class ObjectStore {
  constructor(readonly dir: string) {}

  newId(typeName: string): string {
    return `${typeName.replace(/^kltest_/, '')}-${randomBytes(4).toString('hex')}`;
  }

  pathOf(typeName: string, id: string): string {
    if (!/^[A-Za-z0-9_.-]+$/.test(id)) throw new Error(`invalid object id ${JSON.stringify(id)}`);
    return join(this.dir, typeName, `${id}.json`);
  }

  load(typeName: string, id: string): unknown {
    try {
      return JSON.parse(readFileSync(this.pathOf(typeName, id), 'utf8'));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  }

  save(typeName: string, id: string, json: unknown): void {
    const path = this.pathOf(typeName, id);
    mkdirSync(join(this.dir, typeName), { recursive: true });
    const temp = `${path}.${process.pid}.tmp`;
    writeFileSync(temp, `${JSON.stringify(json, null, 2)}\n`);
    renameSync(temp, path);
  }

  remove(typeName: string, id: string): void {
    rmSync(this.pathOf(typeName, id), { force: true });
  }
}
