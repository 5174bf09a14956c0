import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { FIXTURE_DIR } from '../../domain/apply/__fixtures__/fixtures';
import { HclConfigReader } from './hcl-reader';
import { FileHclUnitsCache, HclUnitsCache, identityOf } from './hcl-units-cache';
import { HclUnit } from '../../domain/apply/config-scope';

const unit: HclUnit = {
  kind: 'resource',
  key: 'terraform_data.a',
  range: { start: 0, end: 32 },
  references: [],
  cut: [],
};

/** Counts what the reader asks of a real file cache. */
class CountingCache implements HclUnitsCache {
  hits = 0;
  puts = 0;
  constructor(private readonly inner: HclUnitsCache) {}
  async get(text: string): Promise<HclUnit[] | null> {
    const units = await this.inner.get(text);
    if (units) this.hits++;
    return units;
  }
  async put(text: string, units: HclUnit[]): Promise<void> {
    this.puts++;
    await this.inner.put(text, units);
  }
}

describe('FileHclUnitsCache', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-hcl-cache-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('answers units only for the exact text and the reader that made them', async () => {
    const cache = new FileHclUnitsCache(dir, () => 'reader-1');
    const text = 'resource "terraform_data" "a" {}\n';
    expect(await cache.get(text)).toBeNull();
    await cache.put(text, [unit]);
    expect(await cache.get(text)).toEqual([unit]);
    expect(await cache.get(text.replace('"a"', '"b"'))).toBeNull();
    expect(await cache.get(text + ' ')).toBeNull();
    expect(await new FileHclUnitsCache(dir, () => 'reader-2').get(text)).toBeNull();
  });

  it('takes an unreadable entry for a miss', async () => {
    const cache = new FileHclUnitsCache(dir, () => 'reader-1');
    const text = 'resource "terraform_data" "a" {}\n';
    await cache.put(text, [unit]);
    const [entry] = fs
      .readdirSync(path.join(dir, 'hcl-units'), { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile());
    fs.writeFileSync(path.join(entry.parentPath, entry.name), '{"units": [');
    expect(await cache.get(text)).toBeNull();
  });

  it('takes a cache directory it cannot write for a miss, not an error', async () => {
    const blocked = path.join(dir, 'file');
    fs.writeFileSync(blocked, '');
    const cache = new FileHclUnitsCache(blocked, () => 'reader-1');
    await expect(cache.put('x = 1\n', [unit])).resolves.toBeUndefined();
    expect(await cache.get('x = 1\n')).toBeNull();
  });
});

describe('HclConfigReader with a units cache', () => {
  let cacheDir: string;
  let configDir: string;
  beforeEach(() => {
    cacheDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-hcl-cache-'));
    configDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-hcl-config-'));
    fs.cpSync(FIXTURE_DIR, configDir, { recursive: true });
  });
  afterEach(() => {
    fs.rmSync(cacheDir, { recursive: true, force: true });
    fs.rmSync(configDir, { recursive: true, force: true });
  });

  it('reads what a fresh parse reads, from the cache the second time', async () => {
    const cache = new CountingCache(new FileHclUnitsCache(cacheDir, () => 'test-reader'));
    const reader = new HclConfigReader(cache);
    const parsed = await new HclConfigReader().readModule(configDir);
    expect(await reader.readModule(configDir)).toEqual(parsed);
    expect(cache.hits).toBe(0);
    expect(cache.puts).toBe(parsed.hcl.length);
    await reader.settled();
    expect(await reader.readModule(configDir)).toEqual(parsed);
    expect(cache.hits).toBe(parsed.hcl.length);
  });

  it('sees an edited file as it is now, not as it was cached', async () => {
    const reader = new HclConfigReader(new FileHclUnitsCache(cacheDir, () => 'test-reader'));
    const keys = async () =>
      (await reader.readModule(configDir)).hcl
        .find((f) => f.name === 'slow_a.tf')!
        .units.map((u) => u.key);
    const before = await keys();
    expect(before).not.toContain('terraform_data.added');
    const file = path.join(configDir, 'slow_a.tf');
    fs.appendFileSync(file, '\nresource "terraform_data" "added" {\n  input = var.env\n}\n');
    const after = await keys();
    expect(after).toEqual([...before, 'terraform_data.added']);
    const added = (await reader.readModule(configDir)).hcl
      .find((f) => f.name === 'slow_a.tf')!
      .units.find((u) => u.key === 'terraform_data.added')!;
    expect(added.references).toEqual(['var.env']);
    // Back to the first text: the first entry again, still right.
    fs.writeFileSync(file, fs.readFileSync(path.join(FIXTURE_DIR, 'slow_a.tf')));
    expect(await keys()).toEqual(before);
    await reader.settled();
  });

  it('never caches a file it cannot parse: fixed, it is read; broken again, it is refused', async () => {
    const reader = new HclConfigReader(new FileHclUnitsCache(cacheDir, () => 'test-reader'));
    const file = path.join(configDir, 'broken.tf');
    fs.writeFileSync(file, 'resource "a" "b" {\n');
    await expect(reader.readModule(configDir)).rejects.toThrow(/^broken\.tf:\d+: not valid HCL/);
    await expect(reader.readModule(configDir)).rejects.toThrow(/^broken\.tf:\d+: not valid HCL/);
    fs.writeFileSync(file, 'resource "a" "b" {}\n');
    const fixed = (await reader.readModule(configDir)).hcl.find((f) => f.name === 'broken.tf')!;
    expect(fixed.units.map((u) => u.key)).toEqual(['a.b']);
    await reader.settled();
  });

  it('answers before its cache entries are written; settled() waits for them', async () => {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const written: string[] = [];
    const slow: HclUnitsCache = {
      get: async () => null,
      put: async (text) => {
        await gate;
        written.push(text);
      },
    };
    const reader = new HclConfigReader(slow);
    const read = await reader.readModule(configDir);
    expect(read.hcl.length).toBeGreaterThan(0);
    expect(written).toEqual([]);
    let settled = false;
    const waiting = reader.settled().then(() => (settled = true));
    await new Promise((resolve) => setImmediate(resolve));
    expect(settled).toBe(false);
    open();
    await waiting;
    expect(written.sort()).toEqual(read.hcl.map((f) => f.text).sort());
  });

  it('settles even when a cache entry cannot be written', async () => {
    const failing: HclUnitsCache = {
      get: async () => null,
      put: () => Promise.reject(new Error('EACCES')),
    };
    const reader = new HclConfigReader(failing);
    expect((await reader.readModule(configDir)).hcl.length).toBeGreaterThan(0);
    await expect(reader.settled()).resolves.toBeUndefined();
  });
});

describe('identityOf', () => {
  it('changes when any byte of what made the units changes', () => {
    const files: Record<string, Buffer> = { a: Buffer.from('grammar'), b: Buffer.from('reader') };
    const read = (f: string) => files[f];
    const first = identityOf(['a', 'b'], read);
    expect(identityOf(['a', 'b'], read)).toBe(first);
    files.b = Buffer.from('reader2');
    expect(identityOf(['a', 'b'], read)).not.toBe(first);
    // Where one file ends and the next begins counts too.
    expect(identityOf(['x', 'y'], (f) => Buffer.from(f === 'x' ? 'ab' : 'c'))).not.toBe(
      identityOf(['x', 'y'], (f) => Buffer.from(f === 'x' ? 'a' : 'bc')),
    );
  });
});

describe('a reader whose identity cannot be read', () => {
  it('caches nothing and fails nothing', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-hcl-cache-'));
    try {
      const cache = new FileHclUnitsCache(dir, () => {
        throw new Error('ENOENT');
      });
      await expect(cache.put('x = 1\n', [unit])).resolves.toBeUndefined();
      expect(await cache.get('x = 1\n')).toBeNull();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
