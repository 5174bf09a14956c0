import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Client } from 'pg';
import { prepareKltest } from '../../bench/support/refresh-kltest';
import { ChildRunner, Run } from '../support/child-runner';
import { kltestMirror, offlineTerraformEnv } from '../support/kltest-mirror';
import { KL, KldProcess, processesMatching, startKld } from '../support/kld-process';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/**
 * `kl refresh --pool`: the same refresh through one kltest provider process
 * and through a pool of three records the same events and prints the same
 * report, and a pooled process that crashes fails the run, naming it, and
 * commits nothing, as a single process that crashes does.
 */

jest.setTimeout(240_000);

const STATE = 'e2e/refresh-pool';
const ITEMS = 60;
const COMMAND_TIMEOUT_MS = 120_000;

let root: string;
let mirror: string;
let rpcLog: string;
let workDir: string;
let objectsDir: string;
let env: NodeJS.ProcessEnv;
let t: TestDatabase;
let kld: KldProcess;
const runner = new ChildRunner(() => ({ cwd: workDir, env }), COMMAND_TIMEOUT_MS);

const kl = (args: string[], extraEnv: NodeJS.ProcessEnv = {}): Promise<Run> =>
  runner.run(process.execPath, [KL, '--server', kld.url, ...args], {
    env: { ...env, ...extraEnv },
  });

const refresh = (pool: number, flags: string[] = [], extraEnv: NodeJS.ProcessEnv = {}) =>
  kl(
    [
      '--format',
      'json',
      'refresh',
      STATE,
      '--pool',
      String(pool),
      '--provider-search-path',
      mirror,
      ...flags,
    ],
    extraEnv,
  );

/** The run's events as recorded, without what differs by nature between two runs (ids, times). */
async function runEvents(runId: string): Promise<{ type: string; data: unknown }[]> {
  const db = new Client({ connectionString: t.url });
  await db.connect();
  try {
    const { rows } = await db.query<{ type: string; data: Record<string, unknown> }>(
      'SELECT type, data FROM kl_events WHERE stream_id = $1 ORDER BY stream_revision',
      [`refresh-${runId}`],
    );
    return rows.map(({ type, data }) => {
      const { runId: _run, durationMs: _duration, ...rest } = data;
      return { type, data: rest };
    });
  } finally {
    await db.end();
  }
}

function report(r: Run): Record<string, unknown> {
  expect(r.stderr).toBe('');
  const {
    run_id: _run,
    duration_ms: _duration,
    ...rest
  } = JSON.parse(r.stdout) as Record<string, unknown>;
  return rest;
}

/** Provider processes (by pid) that answered ReadResource since the log was cleared. */
/** The provider processes (pids) that made this RPC since the log was cleared. */
function callers(method: string): Set<string> {
  const lines = fs.existsSync(rpcLog) ? fs.readFileSync(rpcLog, 'utf8').split('\n') : [];
  return new Set(lines.filter((l) => l.endsWith(` ${method}`)).map((l) => l.split(' ')[0]));
}
const readers = () => callers('ReadResource');

async function currentSerial(): Promise<number> {
  const res = await fetch(`${kld.url}/v1/states/${STATE}`);
  expect(res.status).toBe(200);
  return ((await res.json()) as { serial: number }).serial;
}

beforeAll(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-refresh-pool-e2e-'));
  rpcLog = path.join(root, 'rpc.log');
  const kltest = kltestMirror(root);
  mirror = kltest.mirror;
  t = await createTestDatabase('kl_refresh_pool');
  kld = await startKld({ KL_DATABASE_URL: t.url });
  // terraform applies two items; the state is then grown to ITEMS copies (see the bench).
  const ws = await prepareKltest({
    root,
    kldUrl: kld.url,
    state: STATE,
    instances: ITEMS,
    baseEnv: offlineTerraformEnv(),
    cliConfig: kltest.cliConfig,
  });
  workDir = ws.dir;
  objectsDir = ws.objectsDir;
  env = { ...ws.env, KLTEST_RPC_LOG: rpcLog, KL_CACHE_DIR: path.join(root, 'cache') };
  const config = path.join(root, 'kltest.json');
  fs.writeFileSync(config, JSON.stringify({ state_dir: { env: 'KLTEST_OBJECTS' } }));
  const configured = await kl([
    'provider',
    'configure',
    STATE,
    'kilolock/kltest',
    '--from-json',
    config,
  ]);
  expect(configured.code).toBe(0);
});

afterAll(async () => {
  runner.killAll();
  await kld?.stop();
  await t?.drop();
  if (root) fs.rmSync(root, { recursive: true, force: true });
});

describe('kl refresh --pool', () => {
  it('refuses a pool size that is not a positive integer, in one line, before starting anything', async () => {
    for (const bad of ['0', '-2', 'many', '1.5']) {
      const before = await currentSerial();
      const r = await kl(['refresh', STATE, '--pool', bad]);
      expect(r.code).toBe(2);
      expect(r.stderr.trim()).toBe(`kl: --pool must be a positive integer, got "${bad}"`);
      expect(await currentSerial()).toBe(before);
    }
  });

  it('records the same events and prints the same report through 1 and through 3 provider processes', async () => {
    // Drift on some objects, two gone: something to record besides "unchanged".
    const file = (i: number) =>
      path.join(objectsDir, 'kltest_item', `item-${i.toString(16).padStart(8, '0')}.json`);
    for (const i of [3, 17, 29, 44, 58]) {
      const body = JSON.parse(fs.readFileSync(file(i), 'utf8')) as Record<string, unknown>;
      fs.writeFileSync(file(i), JSON.stringify({ ...body, comment: `edited ${i}` }));
    }
    for (const i of [11, 40]) fs.rmSync(file(i));

    // Each read takes 30 ms, as a remote API's would: one process alone would need about a
    // second for the 60 items, so the others are ready before it could drain them all.
    const slow = { KLTEST_READ_DELAY_MS: '30' };
    fs.rmSync(rpcLog, { force: true });
    const one = await refresh(1, ['--dry-run', '--parallelism', '2'], slow);
    const oneReaders = readers();
    fs.rmSync(rpcLog, { force: true });
    const three = await refresh(3, ['--dry-run', '--parallelism', '2'], slow);
    const threeReaders = readers();
    const threeConfigured = callers('ConfigureProvider');

    expect(one.code).toBe(0);
    expect(three.code).toBe(0);
    expect(oneReaders.size).toBe(1);
    // Three processes ran, each configured once; which of them reads how much depends on
    // which is ready first.
    expect(threeConfigured.size).toBe(3);
    expect(threeReaders.size).toBeGreaterThan(1);
    expect([...threeReaders].every((pid) => threeConfigured.has(pid))).toBe(true);
    expect(report(three)).toEqual(report(one));
    expect(report(one)).toMatchObject({ checked: ITEMS, changed: 5, gone: 2, failed: 0 });
    const [oneEvents, threeEvents] = await Promise.all(
      [one, three].map((r) => runEvents(String(JSON.parse(r.stdout).run_id))),
    );
    expect(oneEvents.filter((e) => e.type === 'ResourceRefreshed')).toHaveLength(ITEMS);
    expect(threeEvents).toEqual(oneEvents);
  });

  it('fails the run when a pooled provider process crashes, naming it, and commits nothing', async () => {
    const before = await currentSerial();
    const crash = { KLTEST_CRASH_ON_READ: 'item-0000001e' };

    const pooled = await refresh(3, [], crash);
    const single = await refresh(1, [], crash);

    for (const [r, name] of [
      [pooled, /provider process [123] of 3 exited \(code 2, signal null\)/],
      [single, /the provider process exited \(code 2, signal null\)/],
    ] as const) {
      expect(r.code).toBe(1);
      const out = JSON.parse(r.stdout) as {
        status: string;
        failed: number;
        to_version: number | null;
        failures: { address: string; message: string }[];
      };
      expect(out.status).toBe('failed');
      expect(out.to_version).toBeNull();
      expect(out.failures.map((f) => f.address)).toContain('kltest_item.x[30]');
      expect(out.failures.some((f) => name.test(f.message))).toBe(true);
      // Each instance recorded once, as read or as failed; none twice, none left out.
      const events = await runEvents(String(JSON.parse(r.stdout).run_id));
      const addresses = events
        .filter((e) => e.type === 'ResourceRefreshed')
        .map((e) => (e.data as { address: string }).address);
      expect(new Set(addresses).size).toBe(ITEMS);
      expect(addresses).toHaveLength(ITEMS);
      expect(events.at(-1)).toMatchObject({
        type: 'RefreshFinished',
        data: { status: 'failed', toVersion: null },
      });
    }
    expect(await currentSerial()).toBe(before);
    expect(processesMatching(mirror)).toEqual([]);
  });
});
