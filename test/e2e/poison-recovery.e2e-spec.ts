import { spawnSync } from 'node:child_process';
import * as http from 'node:http';
import { randomBytes, randomUUID } from 'node:crypto';
import { initialState, LockInfo, StateCommand, stateDecider } from '../../src/domain/state';
import type { StateAggregate } from '../../src/domain/state';
import { EVENT_SCHEMA_VERSION } from '../../src/domain/shared/event';
import { flattenInstances } from '../../src/domain/terraform';
import { Notifier } from '../../src/infrastructure/postgres/notifier';
import { PostgresEventStore } from '../../src/infrastructure/event-store/postgres-event-store';
import { KL, KLD, KldProcess, startKld } from '../support/kld-process';
import { testDocument } from '../support/state-harness';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/**
 * A database written by an older kld, holding the events that version let
 * through (a LockInfo whose Who holds NUL; a resource name no index can
 * hold), and the recovery docs/operations.md describes, step by step, with
 * the real kld, kld CLI and kl CLI.
 */

jest.setTimeout(90_000);

let t: TestDatabase;
let kld: KldProcess;
let poisonPosition: number;
const evil: LockInfo = {
  ID: 'L-evil',
  Operation: 'OperationTypeApply',
  Info: '',
  Who: 'evil\u0000who',
  Version: '1.11.4',
  Created: '2026-01-01T00:00:00Z',
  Path: '',
};

/** Decides and appends a command as the older version did: no boundary checks. */
async function appendAsOldVersion(
  events: PostgresEventStore,
  command: StateCommand,
  state: StateAggregate = initialState(),
): Promise<number> {
  const decided = stateDecider.decide(command, state);
  const metadata = {
    actor: 'old-kld',
    correlationId: randomUUID(),
    causationId: null,
    occurredAt: command.metadata.now,
  };
  const { position } = await events.appendToStream(
    `state-${command.data.name}`,
    decided.map((e) => ({
      eventId: randomUUID(),
      type: e.type,
      schemaVersion: EVENT_SCHEMA_VERSION,
      data: e.data,
      metadata,
    })),
    { expectedRevision: 'no_stream' },
  );
  return Number(position.globalPosition);
}

function run(bin: string, args: string[]) {
  const r = spawnSync(process.execPath, [bin, ...args], {
    encoding: 'utf8',
    env: { ...process.env, KL_DATABASE_URL: t.url, KL_SERVER_URL: kld.url, KL_LOG_LEVEL: 'warn' },
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/**
 * One request on a connection of its own: spawnSync blocks this process, so
 * a pooled keep-alive socket may have been closed by kld meanwhile.
 */
function request(
  method: string,
  path: string,
  body?: string,
): Promise<{ status: number; body: Record<string, unknown> | null }> {
  const { hostname, port } = new URL(kld.url);
  return new Promise((resolve, reject) => {
    const headers = body === undefined ? {} : { 'Content-Type': 'application/json' };
    const req = http.request({ method, hostname, port, path, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : null });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function readyz() {
  return request('GET', '/readyz') as Promise<{ status: number; body: Record<string, unknown> }>;
}

async function eventually(check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(async () => {
  t = await createTestDatabase('kl_poison');
  const notifier = new Notifier(t.url);
  const events = new PostgresEventStore(t.db, notifier);
  const now = '2026-01-01T00:00:00.000Z';
  const metadata = { actor: 'old-kld', correlationId: 'c', now };
  await appendAsOldVersion(events, {
    type: 'LockState',
    data: { name: 'legacy/nul', newStateId: randomUUID(), lockInfo: evil },
    metadata,
  });
  const name = `n${randomBytes(4000).toString('hex')}`;
  const document = testDocument(1, [{ name, input: 'x' }]);
  poisonPosition = await appendAsOldVersion(events, {
    type: 'CommitState',
    data: {
      name: 'legacy/long',
      newStateId: randomUUID(),
      document,
      instances: flattenInstances(document),
      source: 'http',
      checksum: 'old',
    },
    metadata,
  });
  await notifier.close();
  kld = await startKld({ KL_DATABASE_URL: t.url }, 30_000, { waitFor: 'healthz' });
});

afterAll(async () => {
  await kld?.stop();
  await t?.drop();
});

describe('recovering a database that holds events older versions let through', () => {
  it('projects the NUL lock (NUL shown as U+FFFD), and halts loudly on the other event', async () => {
    await eventually(async () => (await readyz()).body.halted !== undefined);
    const ready = await readyz();
    expect(ready).toEqual({
      status: 503,
      body: {
        status: 'not ready',
        checks: { database: true, migrations: true, projections: false, readModels: true },
        halted: [
          {
            projector: 'state-resource-lifecycles',
            position: poisonPosition,
            transactionId: expect.any(String),
            stream: 'state-legacy/long',
            type: 'LifecycleOpened',
            reason: expect.stringContaining('index row size'),
            since: expect.any(String),
          },
        ],
      },
    });
    const locks = run(KL, ['locks', '--format', 'json']);
    expect(locks.code).toBe(0);
    expect(JSON.parse(locks.stdout)).toEqual([
      expect.objectContaining({ state: 'legacy/nul', lock_id: 'L-evil', who: 'evil\uFFFDwho' }),
    ]);
  });

  it('answers writes 503 SERVER.LAGGING meanwhile, and logs the halt once', async () => {
    const r = await request(
      'LOCK',
      '/v1/states/during/halt',
      JSON.stringify({ ...evil, ID: 'L-during', Who: 'ok' }),
    );
    expect(r.status).toBe(503);
    expect(r.body).toEqual({
      error: {
        code: 'SERVER.LAGGING',
        message: 'lock L-during acquired on state during/halt; read models catching up',
      },
    });
    const halts = kld
      .output()
      .split('\n')
      .filter((l) => l.includes('projection halted'));
    expect(halts).toHaveLength(1);
  });

  it('fails a rebuild with the event to skip named', () => {
    // Next to a running server, the server rebuilds (kl); kld itself refuses.
    expect(run(KLD, ['projections', 'rebuild']).code).toBe(2);
    const r = run(KL, ['projections', 'rebuild']);
    expect(r.code).not.toBe(0);
    expect(r.stderr.trim()).toMatch(
      new RegExp(
        `^kl: .*projector state-resource-lifecycles cannot apply event ${poisonPosition} ` +
          '\\(LifecycleOpened on stream state-legacy/long\\): index row size .*$',
      ),
    );
  });

  it('recovers with kld projections skip next to the server: ready again, rebuilds pass, locks released', async () => {
    const bad = run(KLD, [
      'projections',
      'skip',
      'state-resource-lifecycles',
      'x',
      '--reason',
      'r',
    ]);
    expect(bad.code).toBe(2);
    const skipped = run(KLD, [
      'projections',
      'skip',
      'state-resource-lifecycles',
      String(poisonPosition),
      '--reason',
      'resource name longer than an index entry (written by kld 0.1)',
    ]);
    expect(skipped.code).toBe(0);
    expect(skipped.stdout).toContain(
      `state-resource-lifecycles will skip event ${poisonPosition} ` +
        '(LifecycleOpened on stream state-legacy/long)\n',
    );
    // The running server takes it at once (a notification, not its 30 s recheck).
    await eventually(async () => (await readyz()).status === 200, 5_000);
    expect(kld.output()).toContain('projection resumed');

    const rebuilt = run(KL, ['projections', 'rebuild', '--format', 'json']);
    expect({ code: rebuilt.code, stderr: rebuilt.stderr }).toEqual({ code: 0, stderr: '' });
    expect(JSON.parse(rebuilt.stdout)).toEqual(
      expect.arrayContaining([expect.objectContaining({ projector: 'state-resource-lifecycles' })]),
    );
    await eventually(async () => (await readyz()).status === 200);

    // The lock taken while halted is held; both locks can be listed and released.
    const locks = JSON.parse(run(KL, ['locks', '--format', 'json']).stdout) as { state: string }[];
    expect(locks.map((l) => l.state)).toEqual(['during/halt', 'legacy/nul']);
    for (const state of ['legacy/nul', 'during/halt']) {
      expect(run(KL, ['force-unlock', state, '--yes']).code).toBe(0);
    }
    expect(JSON.parse(run(KL, ['locks', '--format', 'json']).stdout)).toEqual([]);
    // terraform's own document for the state is served exactly, long name included.
    const served = await request('GET', '/v1/states/legacy/long');
    expect(served.status).toBe(200);
  });
});
