import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Worker } from 'node:worker_threads';
import { tsWorker } from '../../../test/support/ts-worker';
import { FIXTURE_DIR } from '../../domain/apply/__fixtures__/fixtures';
import { HclUnit } from '../../domain/apply/config-scope';
import { EarlyRead, readEarly } from './early-hcl-read';
import { HclConfigReader } from './hcl-reader';
import { FileHclUnitsCache, HclUnitsCache } from './hcl-units-cache';

const WORKER_TS = path.join(__dirname, 'hcl-read-worker.ts');

/** The read kl starts at its start, on the real worker script (with the test's environment: Jest's own process.env is not the one a thread would copy). */
const realWorker = (dir: string) =>
  readEarly(dir, (d) => tsWorker(WORKER_TS, { workerData: { dir: d }, env: { ...process.env } }));

/** Records which texts the reader looked up in the cache. */
class RecordingCache implements HclUnitsCache {
  readonly asked: string[] = [];
  constructor(private readonly inner: HclUnitsCache) {}
  get(text: string): Promise<HclUnit[] | null> {
    this.asked.push(text);
    return this.inner.get(text);
  }
  put(text: string, units: HclUnit[]): Promise<void> {
    return this.inner.put(text, units);
  }
}

/** Units no parse of the fixture gives: a read that returns them took them from the early read. */
const marked: HclUnit[] = [
  {
    kind: 'other',
    key: 'from.the.early.read',
    range: { start: 0, end: 0 },
    references: [],
    cut: [],
  },
];

describe('readEarly and HclConfigReader', () => {
  let cacheDir: string;
  let configDir: string;
  let saved: string | undefined;
  beforeEach(() => {
    cacheDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-early-cache-'));
    configDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-early-config-'));
    fs.cpSync(FIXTURE_DIR, configDir, { recursive: true });
    // The worker uses kl's default cache, as kl does: here a directory of the test's own.
    saved = process.env.KL_CACHE_DIR;
    process.env.KL_CACHE_DIR = cacheDir;
  });
  afterEach(() => {
    if (saved === undefined) delete process.env.KL_CACHE_DIR;
    else process.env.KL_CACHE_DIR = saved;
    fs.rmSync(cacheDir, { recursive: true, force: true });
    fs.rmSync(configDir, { recursive: true, force: true });
  });

  it('reads on its own thread what the reader reads, and leaves its parses in the cache', async () => {
    const early = realWorker(configDir);
    const source = await early.source;
    await early.ended;
    expect(source).toEqual(await new HclConfigReader().readModule(configDir));
    // One entry per file it parsed, written before its thread ended.
    const entries = fs
      .readdirSync(path.join(cacheDir, 'hcl-units'), { recursive: true })
      .filter((f) => String(f).endsWith('.json'));
    expect(entries).toHaveLength(source!.hcl.length);
  });

  it("takes a file's units from the early read when its text is the one the early read saw", async () => {
    const text = fs.readFileSync(path.join(configDir, 'slow_a.tf'), 'utf8');
    const early: EarlyRead = {
      dir: configDir,
      source: Promise.resolve({
        hcl: [{ name: 'slow_a.tf', text, units: marked }],
        json: new Map(),
      }),
      ended: Promise.resolve(),
    };
    const cache = new RecordingCache(new FileHclUnitsCache(cacheDir, () => 'test-reader'));
    const reader = new HclConfigReader(cache, early);
    const read = await reader.readModule(configDir);
    expect(read.hcl.find((f) => f.name === 'slow_a.tf')?.units).toEqual(marked);
    expect(cache.asked).not.toContain(text);
    // The other files are read as without it.
    const plain = await new HclConfigReader().readModule(configDir);
    expect(read.hcl.filter((f) => f.name !== 'slow_a.tf')).toEqual(
      plain.hcl.filter((f) => f.name !== 'slow_a.tf'),
    );
  });

  it('reads a file changed since the early read as it is now', async () => {
    const early = realWorker(configDir);
    await early.source;
    const file = path.join(configDir, 'slow_a.tf');
    fs.appendFileSync(file, '\nresource "terraform_data" "added_since" {}\n');
    const read = await new HclConfigReader(null, early).readModule(configDir);
    const keys = read.hcl.find((f) => f.name === 'slow_a.tf')!.units.map((u) => u.key);
    expect(keys).toContain('terraform_data.added_since');
    expect(read).toEqual(await new HclConfigReader().readModule(configDir));
    await early.ended;
  });

  it('reads as without it when the early thread fails, cannot start or reads another directory', async () => {
    const plain = await new HclConfigReader().readModule(configDir);
    const failing = [
      readEarly(configDir, () => new Worker('throw new Error("boom")', { eval: true })),
      readEarly(configDir, () => new Worker('process.exit(3)', { eval: true })),
      readEarly(configDir, () => {
        throw new Error('no threads here');
      }),
      realWorker(path.join(configDir, 'no-such-dir')),
    ];
    for (const early of failing) {
      expect(await early.source).toBeNull();
      const reader = new HclConfigReader(null, { ...early, dir: configDir });
      expect(await reader.readModule(configDir)).toEqual(plain);
      await reader.settled();
    }
  });

  it('is not waited for by a read of another directory', async () => {
    const never: EarlyRead = {
      dir: path.join(configDir, 'elsewhere'),
      source: new Promise(() => undefined),
      ended: Promise.resolve(),
    };
    const plain = await new HclConfigReader().readModule(configDir);
    expect(await new HclConfigReader(null, never).readModule(configDir)).toEqual(plain);
  });
});
