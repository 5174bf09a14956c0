import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import * as http from 'node:http';
import { KL, KldProcess, startKld } from '../support/kld-process';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/**
 * The built `kl` against a real kld for what operators see of parallel
 * apply: `kl locks` and `kl reservations` (plan locks shared, runs'
 * reservations), `kl runs`, `kl apply abort`, `kl force-unlock --lock-id`.
 */

jest.setTimeout(90_000);

let t: TestDatabase;
let kld: KldProcess;

beforeAll(async () => {
  t = await createTestDatabase('kl_reservations_cli');
  kld = await startKld({ KL_DATABASE_URL: t.url });
});

afterAll(async () => {
  await kld?.stop();
  await t?.drop();
});

function kl(args: string[]) {
  const r = spawnSync(process.execPath, [KL, ...args], {
    input: '',
    encoding: 'utf8',
    env: { ...process.env, KL_SERVER_URL: kld.url, KL_ACTOR: 'operator@ops' },
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

function json(args: string[]): Record<string, unknown>[] {
  const r = kl([...args, '--format', 'json']);
  expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
  return JSON.parse(r.stdout) as Record<string, unknown>[];
}

/** Exit 1 and one readable line on stderr. */
function fails(args: string[], message: RegExp): void {
  const r = kl(args);
  expect(r.code).toBe(1);
  const lines = r.stderr.trimEnd().split('\n');
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(/^kl: /);
  expect(lines[0]).toMatch(message);
}

/**
 * One request on a connection of its own: fetch does not retry a LOCK (a
 * method it does not know to be idempotent) on a keep-alive socket the
 * server closed meanwhile.
 */
function call(method: string, path: string, body?: object, actor = 'alice') {
  const text = body === undefined ? undefined : JSON.stringify(body);
  const url = new URL(path, kld.url);
  return new Promise<{ status: number; json: Record<string, unknown> }>((resolve, reject) => {
    const req = http.request(
      {
        hostname: url.hostname,
        port: url.port,
        path: url.pathname,
        method,
        agent: false,
        headers: {
          'X-Kilolock-Actor': actor,
          ...(text === undefined ? {} : { 'Content-Type': 'application/json' }),
        },
      },
      (res) => {
        let answer = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (answer += chunk));
        res.on('end', () =>
          // Terraform's routes answer a success with an empty body.
          resolve({ status: res.statusCode ?? 0, json: answer === '' ? {} : JSON.parse(answer) }),
        );
      },
    );
    req.on('error', reject);
    req.end(text);
  });
}

async function newState(): Promise<string> {
  const name = `ops/${randomUUID().slice(0, 8)}`;
  const posted = await call('POST', `/v1/states/${name}`, {
    version: 4,
    terraform_version: '1.11.4',
    serial: 1,
    lineage: randomUUID(),
    outputs: {},
    resources: [],
    check_results: null,
  });
  expect(posted.status).toBe(200);
  return name;
}

function planLock(id: string, who: string) {
  return {
    ID: id,
    Operation: 'OperationTypePlan',
    Info: '',
    Who: who,
    Version: '1.11.4',
    Created: new Date().toISOString(),
    Path: '',
  };
}

describe('kl and terraform plan locks', () => {
  it('lists shared plan locks, and force-unlocks only the one picked with --lock-id', async () => {
    const name = await newState();
    for (const [id, who] of [
      ['plan-1', 'ann@laptop'],
      ['plan-2', 'ben@ci'],
    ]) {
      expect((await call('LOCK', `/v1/states/${name}`, planLock(id, who))).status).toBe(200);
    }
    const locks = json(['locks']).filter((l) => l.state === name);
    expect(locks.map((l) => [l.lock_id, l.mode, l.who])).toEqual([
      ['plan-1', 'read', 'ann@laptop'],
      ['plan-2', 'read', 'ben@ci'],
    ]);
    expect(json(['reservations', name]).map((r) => [r.glob, r.mode, r.kind, r.lock_id])).toEqual([
      ['*', 'read', 'terraform-plan', 'plan-1'],
      ['*', 'read', 'terraform-plan', 'plan-2'],
    ]);

    // Two holders: kl will not guess which one is meant.
    fails(['force-unlock', name, '--yes'], /held by 2 locks .*pick one with --lock-id/);
    expect(json(['force-unlock', name, '--lock-id', 'plan-2', '--yes'])).toEqual([
      { state: name, released_lock_id: 'plan-2', held_by: 'ben@ci' },
    ]);
    expect(json(['reservations', name]).map((r) => r.lock_id)).toEqual(['plan-1']);
  });
});

describe('kl and apply runs', () => {
  it('shows a run in kl reservations and kl runs, and kl apply abort frees it', async () => {
    const name = await newState();
    const started = await call(
      'POST',
      `/v1/api/states/${name}/apply-runs`,
      { base_version: 1, write: ['module.web.*'], read: ['aws_vpc.main'], lease_seconds: 600 },
      'alice@laptop',
    );
    expect(started.status).toBe(201);
    const runId = started.json.run_id as string;

    const held = json(['reservations', name]);
    // Acquired together: by glob.
    expect(held.map((r) => [r.glob, r.mode, r.kind, r.actor, r.run_id])).toEqual([
      ['aws_vpc.main', 'read', 'apply', 'alice@laptop', runId],
      ['module.web.*', 'write', 'apply', 'alice@laptop', runId],
    ]);
    // The lease counts down from 10 minutes.
    expect(held[1].expires_in).toMatch(/^(9m\d+s|10m0s|10m)$/);

    const [running] = json(['runs', name]);
    expect(running).toMatchObject({
      run_id: runId,
      state: name,
      actor: 'alice@laptop',
      status: 'running',
      write: ['module.web.*'],
      writes: 1,
      read: ['aws_vpc.main'],
      reads: 1,
      finished_at: null,
    });

    // Terraform meanwhile is told who holds the state.
    const refused = await call('LOCK', `/v1/states/${name}`, {
      ...planLock('apply-1', 'carl@laptop'),
      Operation: 'OperationTypeApply',
    });
    expect(refused.status).toBe(423);
    expect(refused.json).toMatchObject({ ID: runId, Who: 'alice@laptop', Operation: 'kl apply' });

    expect(json(['apply', 'abort', runId])).toEqual([
      { run_id: runId, state: name, status: 'aborted', released: 2 },
    ]);
    expect(json(['reservations', name])).toEqual([]);
    const [aborted] = json(['runs', name]);
    expect(aborted).toMatchObject({ run_id: runId, status: 'aborted' });
    expect(aborted.error).toBe('aborted by operator@ops');
    // Aborting again releases nothing and keeps how it ended.
    expect(json(['apply', 'abort', runId])).toEqual([
      { run_id: runId, state: name, status: 'aborted', released: 0 },
    ]);
    expect((await call('LOCK', `/v1/states/${name}`, planLock('after', 'carl'))).status).toBe(200);
  });

  it('refuses to abort what is not a run, in one line', async () => {
    const unknown = randomUUID();
    fails(['apply', 'abort', unknown], new RegExp(`apply run ${unknown} does not exist`));
    fails(['apply', 'abort', 'not-a-run'], /run id must be a uuid/);
  });
});
