import { randomUUID } from 'node:crypto';
import { globsIntersect, parseAddressGlob } from '../../src/domain/reservations';
import { KldProcess, startKld } from '../support/kld-process';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/**
 * Two `kld serve` processes on one database, racing apply-run starts split
 * across both: reservations are decided on the state's stream revision, so
 * overlapping writes never both win, disjoint ones all do, and a lease that
 * ran out is reclaimed exactly once.
 */

jest.setTimeout(180_000);

interface Answer {
  status: number;
  json: Record<string, unknown> & { error?: Record<string, unknown> };
}

let t: TestDatabase;
let a: KldProcess;
let b: KldProcess;

beforeAll(async () => {
  t = await createTestDatabase('kl_apply_replicas');
  [a, b] = await Promise.all([
    startKld({ KL_DATABASE_URL: t.url }),
    startKld({ KL_DATABASE_URL: t.url }),
  ]);
});

afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
  await t?.drop();
});

const PROVIDER = 'provider["terraform.io/builtin/terraform"]';

async function call(kld: KldProcess, method: string, path: string, body?: object, actor = 'ci') {
  const r = await fetch(`${kld.url}${path}`, {
    method,
    body: body === undefined ? undefined : JSON.stringify(body),
    headers: {
      'X-Kilolock-Actor': actor,
      ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
    },
  });
  const text = await r.text();
  let json: Answer['json'] = {};
  try {
    json = JSON.parse(text) as Answer['json'];
  } catch {
    json = { text };
  }
  return { status: r.status, json };
}

/** A state with `module.m<i>.terraform_data.r` for i < modules, at version 1. */
async function newState(prefix: string, modules: number): Promise<string> {
  const name = `team/${prefix}-${randomUUID().slice(0, 8)}`;
  const document = {
    version: 4,
    terraform_version: '1.11.4',
    serial: 1,
    lineage: randomUUID(),
    outputs: {},
    resources: Array.from({ length: modules }, (_, i) => ({
      module: `module.m${i}`,
      mode: 'managed',
      type: 'terraform_data',
      name: 'r',
      provider: PROVIDER,
      instances: [
        {
          schema_version: 0,
          attributes: { id: `m${i}`, input: null, output: null, triggers_replace: null },
          sensitive_attributes: [],
        },
      ],
    })),
    check_results: null,
  };
  const posted = await fetch(`${a.url}/v1/states/${name}`, {
    method: 'POST',
    body: JSON.stringify(document),
    headers: { 'Content-Type': 'application/json' },
  });
  expect(posted.status).toBe(200);
  return name;
}

const runs = (name: string) => `/v1/api/states/${name}/apply-runs`;

interface Grant {
  runId: string;
  glob: string;
  mode: string;
  acquiredAt: number;
  releasedAt: number;
}

/**
 * Every reservation the state's stream ever granted, with the stream
 * revision at which it was granted and at which it ended (released,
 * expired, or not yet: Infinity), read from the events themselves.
 */
async function grantsOnStream(name: string): Promise<Grant[]> {
  const rows = await t.db.query<{ type: string; data: Record<string, unknown> }>(
    `SELECT type, data FROM kl_events
      WHERE stream_id = $1
        AND type IN ('ReservationAcquired', 'ReservationReleased', 'ReservationExpired')
      ORDER BY stream_revision`,
    [`state-${name}`],
  );
  const grants = new Map<string, Grant>();
  rows.forEach((row, at) => {
    const d = row.data;
    if (row.type === 'ReservationAcquired') {
      grants.set(d.reservationId as string, {
        runId: d.runId as string,
        glob: d.glob as string,
        mode: d.mode as string,
        acquiredAt: at,
        releasedAt: Infinity,
      });
    } else {
      for (const id of d.reservationIds as string[]) grants.get(id)!.releasedAt = at;
    }
  });
  return [...grants.values()];
}

/** Pairs of grants of different runs that were live at once, overlapping, one of them a write. */
function overlappingGrants(grants: Grant[]): string[] {
  const found: string[] = [];
  for (const [i, x] of grants.entries()) {
    for (const y of grants.slice(i + 1)) {
      if (x.runId === y.runId) continue;
      const together = x.acquiredAt < y.releasedAt && y.acquiredAt < x.releasedAt;
      const conflicting =
        (x.mode === 'write' || y.mode === 'write') &&
        globsIntersect(parseAddressGlob(x.glob), parseAddressGlob(y.glob));
      if (together && conflicting) found.push(`${x.runId} ${x.glob} / ${y.runId} ${y.glob}`);
    }
  }
  return found;
}

describe('apply runs racing on two kld processes', () => {
  it('grants exactly one of 20 racing overlapping starts, naming it to the others (10 rounds)', async () => {
    const name = await newState('race', 2);
    // Every pair of these overlaps: a module, one instance in it, everything.
    const globs = ['module.m0.*', 'module.m0.terraform_data.r', '*', 'module.m0'];
    const failures: string[] = [];
    for (let round = 0; round < 10; round++) {
      const starts = Array.from({ length: 20 }, (_, i) => ({
        run_id: randomUUID(),
        base_version: 1,
        write: [globs[i % globs.length]],
      }));
      const answers = await Promise.all(
        starts.map((body, i) => call(i % 2 === 0 ? a : b, 'POST', runs(name), body, `racer-${i}`)),
      );
      const winners = answers.flatMap((r, i) => (r.status === 201 ? [starts[i]] : []));
      if (winners.length !== 1) {
        failures.push(`round ${round}: ${winners.length} winners`);
      }
      for (const [i, r] of answers.entries()) {
        if (r.status === 201) continue;
        const holders = (r.json.error?.holders ?? []) as { run_id: string; kind: string }[];
        if (
          r.status !== 409 ||
          r.json.error?.code !== 'RESERVATION.CONFLICT' ||
          holders.length !== 1 ||
          holders[0].run_id !== winners[0]?.run_id ||
          holders[0].kind !== 'apply'
        ) {
          failures.push(`round ${round} racer ${i}: ${r.status} ${JSON.stringify(r.json)}`);
        }
      }
      // Released through either replica; the next round starts free.
      for (const w of winners) {
        const via = round % 2 === 0 ? b : a;
        const aborted = await call(via, 'POST', `/v1/api/apply-runs/${w.run_id}/abort`, {});
        if (aborted.status !== 200) failures.push(`round ${round} abort: ${aborted.status}`);
      }
    }
    expect(failures).toEqual([]);

    const grants = await grantsOnStream(name);
    expect(grants).toHaveLength(10);
    expect(overlappingGrants(grants)).toEqual([]);
    // Both replicas agree nothing is held now.
    for (const kld of [a, b]) {
      const listed = await call(kld, 'GET', `/v1/api/states/${name}/reservations`);
      expect(listed).toEqual({ status: 200, json: { state: name, reservations: [], runs: [] } });
    }
  });

  it('grants all of 20 racing disjoint starts, and shared reads beside them', async () => {
    const name = await newState('disjoint', 20);
    const starts = Array.from({ length: 20 }, (_, i) => ({
      run_id: randomUUID(),
      base_version: 1,
      write: [`module.m${i}.*`],
      // Every run reads what all others read: reads never conflict with reads.
      read: ['module.shared.*'],
    }));
    const answers = await Promise.all(
      starts.map((body, i) => call(i % 2 === 0 ? a : b, 'POST', runs(name), body, `racer-${i}`)),
    );
    expect(answers.map((r) => r.status)).toEqual(starts.map(() => 201));
    expect(answers.map((r) => r.json.run_id)).toEqual(starts.map((s) => s.run_id));

    const grants = await grantsOnStream(name);
    expect(grants).toHaveLength(40);
    expect(grants.filter((g) => g.releasedAt === Infinity)).toHaveLength(40);
    expect(overlappingGrants(grants)).toEqual([]);
    for (const kld of [a, b]) {
      const listed = await call(kld, 'GET', `/v1/api/states/${name}/reservations`);
      expect((listed.json.reservations as unknown[]).length).toBe(40);
    }
    // Both read models are open to SQL (kl_reader), and agree.
    for (const [table, expected] of [
      ['resource_reservations', 40],
      ['apply_runs', 20],
    ] as const) {
      const query = await call(b, 'POST', '/v1/query', {
        sql: `SELECT count(*)::int FROM ${table} WHERE state_name = $1`,
        params: [name],
      });
      expect([query.status, query.json.rows]).toEqual([200, [[expected]]]);
    }
    // A writer of anything they read or write waits for them, on either replica.
    const blocked = await call(b, 'POST', runs(name), {
      base_version: 1,
      write: ['module.shared.terraform_data.x'],
    });
    expect(blocked.status).toBe(409);
    expect((blocked.json.error?.holders as unknown[]).length).toBe(20);
  });

  it('reclaims a lapsed lease exactly once when 10 racers want it, and the lapsed run cannot commit', async () => {
    const name = await newState('lease', 1);
    const lapsed = randomUUID();
    const first = await call(a, 'POST', runs(name), {
      run_id: lapsed,
      base_version: 1,
      write: ['module.m0.*'],
      lease_seconds: 5,
    });
    expect(first.status).toBe(201);
    // Before it runs out, the lease holds on the other replica too.
    const early = await call(b, 'POST', runs(name), { base_version: 1, write: ['*'] });
    expect(early.status).toBe(409);
    await new Promise((resolve) => setTimeout(resolve, 5_500));

    const starts = Array.from({ length: 10 }, () => ({
      run_id: randomUUID(),
      base_version: 1,
      write: ['module.m0.terraform_data.r'],
    }));
    const answers = await Promise.all(
      starts.map((body, i) => call(i % 2 === 0 ? a : b, 'POST', runs(name), body)),
    );
    const won = answers.flatMap((r, i) => (r.status === 201 ? [starts[i].run_id] : []));
    expect(won).toHaveLength(1);
    expect(answers.filter((r) => r.status === 409)).toHaveLength(9);

    const expired = await t.db.query<{ run: string; by: string }>(
      `SELECT data->>'runId' AS run, data->>'reclaimedBy' AS by FROM kl_events
        WHERE type = 'ReservationExpired' AND stream_id = $1`,
      [`state-${name}`],
    );
    expect(expired).toEqual([{ run: lapsed, by: won[0] }]);
    expect(overlappingGrants(await grantsOnStream(name))).toEqual([]);

    // The lapsed run learns it on its next heartbeat, and its commit is refused.
    const beat = await call(b, 'POST', `${runs(name)}/${lapsed}/heartbeat`, {});
    expect([beat.status, beat.json.error?.code]).toEqual([409, 'RESERVATION.EXPIRED']);
    const commit = await call(a, 'POST', `${runs(name)}/${lapsed}/commit`, {
      base_version: 1,
      terraform_version: '1.11.4',
      upserts: [],
      deletes: ['module.m0.terraform_data.r'],
      outputs: { set: {}, remove: [] },
    });
    expect([commit.status, commit.json.error?.code]).toEqual([409, 'RESERVATION.NOT_HELD']);
    const listed = await call(b, 'GET', `/v1/api/states/${name}/reservations`);
    expect((listed.json.reservations as { run_id: string }[]).map((r) => r.run_id)).toEqual([
      won[0],
    ]);
  });
});
