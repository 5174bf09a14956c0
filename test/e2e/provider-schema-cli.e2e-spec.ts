import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { kltestMirror } from '../support/kltest-mirror';
import { KL, KldProcess, startKld } from '../support/kld-process';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/** `kl provider schema` against a real kld: the schema is fetched once per (source, version). */
describe('kl provider schema with kld as the schema cache', () => {
  let t: TestDatabase;
  let kld: KldProcess;
  let root: string;
  let mirror: string;
  let rpcLog: string;

  beforeAll(async () => {
    t = await createTestDatabase();
    kld = await startKld({ KL_DATABASE_URL: t.url });
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-schema-'));
    rpcLog = path.join(root, 'rpc.log');
    mirror = kltestMirror(root).mirror;
  });
  afterAll(async () => {
    await kld?.stop();
    await t?.drop();
    fs.rmSync(root, { recursive: true, force: true });
  });

  // Each run gets an empty local cache, so what it does not fetch came from kld.
  const schema = () =>
    spawnSync(
      process.execPath,
      [
        KL,
        '--server',
        kld.url,
        '--format',
        'json',
        'provider',
        'schema',
        'kilolock/kltest',
        '--provider-search-path',
        mirror,
      ],
      {
        encoding: 'utf8',
        env: {
          ...process.env,
          KLTEST_RPC_LOG: rpcLog,
          KL_CACHE_DIR: fs.mkdtempSync(path.join(root, 'cache-')),
        },
      },
    );
  const rpcs = () => (fs.existsSync(rpcLog) ? fs.readFileSync(rpcLog, 'utf8') : '');

  it('fetches the schema from the provider once, then serves it from kld', async () => {
    const first = schema();
    expect(first.stderr).toBe('');
    expect(first.status).toBe(0);
    const rows = JSON.parse(first.stdout) as { type: string; schema_version: number }[];
    expect(rows).toContainEqual({ type: 'kltest_item', schema_version: 1 });
    expect(rows).toContainEqual({ type: 'kltest_bucket', schema_version: 0 });
    expect(rpcs()).toMatch(/GetProviderSchema/);
    const stored = await t.db.query(
      `SELECT source, version FROM provider_schemas WHERE source LIKE '%kilolock/kltest'`,
    );
    expect(stored).toEqual([{ source: 'registry.terraform.io/kilolock/kltest', version: '0.1.0' }]);

    fs.rmSync(rpcLog, { force: true });
    const second = schema();
    expect(second.status).toBe(0);
    expect(JSON.parse(second.stdout)).toEqual(rows);
    expect(rpcs()).not.toMatch(/GetProviderSchema/);
  });

  it('says in one line that a provider is not installed', () => {
    const r = spawnSync(
      process.execPath,
      [
        KL,
        '--server',
        kld.url,
        'provider',
        'schema',
        'hashicorp/nothing',
        '--provider-search-path',
        mirror,
      ],
      { encoding: 'utf8' },
    );
    expect(r.status).toBe(1);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(
      /^kl: provider registry\.terraform\.io\/hashicorp\/nothing .*not found; searched /,
    );
  });
});
