import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import type { ExpectedRevision } from '../../src/application/ports/event-store.port';
import { LogPosition, metadataFor } from '../../src/domain/shared/event';
import { flattenInstances } from '../../src/domain/terraform';
import {
  CommitState,
  LifecycleOpened,
  StateEvent,
  stateDecider,
  stateStreamId,
} from '../../src/domain/state';
import { KldServer, startServer } from '../../src/app/server';
import { allProjectors, readModelTables } from '../support/all-projectors';
import { loadConfig } from '../../src/infrastructure/config/config';
import { Notifier } from '../../src/infrastructure/postgres/notifier';
import { PostgresEventStore } from '../../src/infrastructure/event-store/postgres-event-store';
import type { Database } from '../../src/infrastructure/postgres/database';
import { ProjectionRunner } from '../../src/projections/projection-runner';
import type { Projector } from '../../src/projections/projector';
import { schemaFingerprint } from '../support/catalog';
import { lockInfo, testDocument } from '../support/state-harness';
import { createTestDatabase, quietLogger, TestDatabase } from '../support/test-database';

// Big enough that the replay spans several catch-up batches (5,000 events)
// and that a document or a count served from half-rebuilt tables would
// differ; the replay is held halfway by the test, so its size does not make
// the race. (It was 20,000: most of this spec's time went to seeding,
// serving and replaying it. What a big replay costs is bench:ladder's to
// measure: it times a rebuild at sizes up to 100,000 instances.)
const INSTANCES = 5_000;
const VERSIONS = 200;
const CHANGED_PER_VERSION = 10;
const SEED = metadataFor({ actor: 'seeder', correlationId: 'seed', now: '2026-01-01T00:00:00Z' });

/**
 * A rebuild replays the log beside the live read models and swaps the result
 * in at the end, so terraform and `kl query` keep working all through it.
 */
describe('rebuilding the read models while kld serves', () => {
  let k: Kld;
  beforeAll(async () => (k = await Kld.start()));
  afterAll(async () => k.close());

  it('keeps every definition of the read models: columns, keys, indexes, grants, views, functions', async () => {
    await k.commit('catalog/one', testDocument(1, [{ name: 'a', input: 'x' }]));
    const before = await schemaFingerprint(k.db);
    await k.rebuilder().runner.rebuild();
    expect(await schemaFingerprint(k.db)).toEqual(before);
    // kl_reader reads the new tables through views and functions as before.
    expect(
      await k.query(`SELECT count(*) FROM current_resources WHERE state_name = $1`, [
        'catalog/one',
      ]),
    ).toEqual([[1]]);
    expect(await k.query(`SELECT count(*) FROM resources_at($1, 1)`, ['catalog/one'])).toEqual([
      [1],
    ]);
  });

  it('lets readers through while a long query keeps the swap waiting', async () => {
    await k.commit('patient', testDocument(1, [{ name: 'p', input: 'x' }]));
    const long = new Client({ connectionString: k.t.url });
    await long.connect();
    try {
      await long.query('BEGIN');
      await long.query('SELECT count(*) FROM raw_state');
      const retries: string[] = [];
      const logger = quietLogger.child({});
      logger.info = ((_: unknown, msg?: string) => {
        if (msg?.includes('swap later')) retries.push(msg);
      }) as typeof logger.info;
      const runner = new ProjectionRunner({
        events: k.events,
        db: k.db,
        notifier: k.notifier,
        logger,
      }).register(allProjectors(k.events));
      const rebuilt = runner.rebuild();
      rebuilt.catch(() => undefined);
      expect(await until(() => retries.length >= 2, 60_000)).toBe(true);
      // The swap let go of what it had taken: a GET does not queue behind it.
      for (let i = 0; i < 5; i++) expect((await k.get('patient')).status).toBe(200);
      await long.query('COMMIT');
      await rebuilt;
      expect(JSON.parse((await k.get('patient')).text).serial).toBe(1);
    } finally {
      await long.end();
    }
  });

  it('refuses a second rebuild while one runs, with a JSON 409', async () => {
    await k.commit('twice', testDocument(1, [{ name: 't', input: 'x' }]));
    const { runner, paused, release } = k.rebuilder(1);
    const rebuilt = runner.rebuild();
    rebuilt.catch(() => undefined);
    await paused;
    const r = await fetch(`${k.server.url}/v1/admin/projections/rebuild`, { method: 'POST' });
    release();
    expect(r.status).toBe(409);
    expect(await r.json()).toEqual({
      error: { code: 'PROJECTIONS.REBUILD_RUNNING', message: expect.any(String) },
    });
    await rebuilt;
    const again = await fetch(`${k.server.url}/v1/admin/projections/rebuild`, { method: 'POST' });
    expect(again.status).toBe(200);
  });
});

describe(`rebuilding ${INSTANCES} instances × ${VERSIONS} versions while terraform works`, () => {
  let k: Kld;
  let seeded: LogPosition;
  beforeAll(async () => {
    // Seeded before kld starts, by appending the events a terraform client's
    // commits would have produced (200 decisions over 5,000 instances each
    // would take long), and projected in big batches.
    const t = await createTestDatabase();
    const notifier = new Notifier(t.url);
    try {
      const events = new PostgresEventStore(t.db, notifier);
      let expectedRevision: ExpectedRevision = 'no_stream';
      for (const commit of bigStateCommits(INSTANCES, VERSIONS, CHANGED_PER_VERSION)) {
        const result = await events.appendToStream(
          stateStreamId('big'),
          commit.map((e) => ({ ...e, eventId: randomUUID(), schemaVersion: 1, metadata: SEED })),
          { expectedRevision },
        );
        expectedRevision = result.nextExpectedRevision;
        seeded = result.position;
      }
      const runner = new ProjectionRunner({
        events,
        db: t.db,
        notifier,
        logger: quietLogger,
      }).register(allProjectors(events));
      await runner.waitForPosition(seeded, undefined, 120_000);
    } finally {
      await notifier.close();
    }
    k = await Kld.start(t);
  }, 180_000);
  afterAll(async () => k.close());

  it('serves every read whole and takes every write, before, during and after the swap', async () => {
    const document = (await k.get('big')).text;
    expect(JSON.parse(document).serial).toBe(VERSIONS);
    await k.commit('small', testDocument(1, [{ name: 'one', input: 'v1' }]));
    await k.commit('other', testDocument(1, [{ name: 'one', input: 'v1' }]));

    const failures: string[] = [];
    let reads = 0;
    let stopReading = false;
    const readLoop = async () => {
      while (!stopReading) {
        const r = await k.get('big');
        if (r.status !== 200 || r.text !== document) {
          failures.push(`GET answered ${r.status} with ${r.text.length} bytes`);
        }
        const rows = await k
          .query(
            `SELECT (SELECT count(*) FROM current_resources WHERE state_name = $1),
                    (SELECT count(*) FROM resources_at($1, $2))`,
            ['big', VERSIONS],
          )
          .catch((err: Error) => [[err.message]]);
        if (JSON.stringify(rows) !== JSON.stringify([[INSTANCES, INSTANCES]])) {
          failures.push(`a current_resources query answered ${JSON.stringify(rows)}`);
        }
        reads += 1;
      }
    };
    /** terraform apply: LOCK, POST the next serial under the lock, UNLOCK. */
    const writer = (name: string) => {
      const w = { serial: 1, stop: false, done: Promise.resolve() };
      w.done = (async () => {
        while (!w.stop) {
          const serial = w.serial + 1;
          const id = `${name}-${serial}`;
          const info = JSON.stringify(lockInfo(id));
          const doc = testDocument(serial, [{ name: 'one', input: `v${serial}` }]);
          for (const [method, path, body] of [
            ['LOCK', name, info],
            ['POST', `${name}?ID=${id}`, JSON.stringify(doc)],
            ['UNLOCK', name, info],
          ]) {
            const r = await k.backend(method, path, body);
            if (r.status !== 200) failures.push(`${method} ${name}: ${r.status} ${await r.text()}`);
            if (method === 'POST' && r.status === 200) w.serial = serial;
          }
        }
      })();
      return w;
    };

    const { runner, paused, release } = k.rebuilder(VERSIONS / 2);
    const rebuilt = runner.rebuild();
    rebuilt.catch(() => undefined);
    await paused;
    // The replay of raw_state (what a terraform GET reads) is halfway, held
    // there: the live tables must go on answering whole, and writes landing,
    // however long it takes.
    const reading = readLoop();
    const small = writer('small');
    const progressed = await until(() => reads >= 10 && small.serial >= 6, 60_000);
    small.stop = true;
    if (!progressed) {
      release();
      stopReading = true;
      await Promise.allSettled([rebuilt, reading, small.done]);
      throw new Error(
        `while the rebuild was under way only ${reads} reads and ${small.serial - 1} writes ` +
          `completed; failures: ${JSON.stringify(failures)}`,
      );
    }
    await small.done;
    const beforeSwap = await rowsExcept(k.db, 'other');
    // From here on through the swap: reads, and writes to another state.
    const other = writer('other');
    release();
    const report = await rebuilt;
    const readsAfter = reads + 3;
    const otherAfter = other.serial + 2;
    await until(() => reads >= readsAfter && other.serial >= otherAfter, 60_000);
    other.stop = true;
    stopReading = true;
    await Promise.all([reading, other.done]);

    expect(failures).toEqual([]);
    expect(report.find((r) => r.projector === 'state-raw')!.events).toBeGreaterThan(INSTANCES);
    // Every read model is what it was, the writes made during the replay
    // included (rebuild equality)...
    expect(await rowsExcept(k.db, 'other')).toEqual(beforeSwap);
    // ...and nothing a write did around the swap is missing.
    const o = await k.get('other');
    expect(JSON.parse(o.text).serial).toBe(other.serial);
    expect(
      await k.db.query(
        `SELECT s.current_version, s.current_serial::int, count(v.*)::int AS versions
           FROM states s JOIN state_versions v USING (state_id)
          WHERE s.name = 'other' GROUP BY 1, 2`,
      ),
    ).toEqual([
      { current_version: other.serial, current_serial: other.serial, versions: other.serial },
    ]);
    expect(await k.db.query('SELECT name FROM state_locks')).toEqual([]);
  }, 180_000);
});

/** kld in-process on a database of its own, and what the tests do with it. */
class Kld {
  private constructor(
    readonly t: TestDatabase,
    readonly server: KldServer,
    readonly notifier: Notifier,
  ) {}

  static async start(database?: TestDatabase): Promise<Kld> {
    const t = database ?? (await createTestDatabase());
    const server = await startServer(
      loadConfig({ KL_DATABASE_URL: t.url, KL_LISTEN: '127.0.0.1:0', KL_GRPC_LISTEN: 'off' }),
      quietLogger,
    );
    return new Kld(t, server, new Notifier(t.url));
  }

  get db(): Database {
    return this.t.db;
  }

  /** The event store as another process would open it. */
  get events(): PostgresEventStore {
    return new PostgresEventStore(this.t.db, this.notifier);
  }

  async close(): Promise<void> {
    await this.notifier.close();
    await this.server.close();
    await this.t.drop();
  }

  /**
   * A second runner on the same database, like `kld projections rebuild` in
   * another process. With `holdAt`, its replay of raw_state (the table a
   * terraform GET reads) pauses just before the commit of that version.
   */
  rebuilder(holdAt?: number) {
    let reached!: () => void;
    let release!: () => void;
    const paused = new Promise<void>((r) => (reached = r));
    const resumed = new Promise<void>((r) => (release = r));
    let held = false;
    const projectors = allProjectors(this.events).map((p): Projector => {
      if (p.name !== 'state-raw' || holdAt === undefined) return p;
      return {
        name: p.name,
        handles: p.handles,
        tables: p.tables,
        apply: async (events, tx) => {
          const due = events.some(
            (e) => e.type === 'ApplyCommitted' && (e.data as { version: number }).version >= holdAt,
          );
          if (due && !held) {
            held = true;
            reached();
            await resumed;
          }
          await p.apply(events, tx);
        },
      };
    });
    const runner = new ProjectionRunner({
      events: this.events,
      db: this.db,
      notifier: this.notifier,
      logger: quietLogger,
    }).register(projectors);
    return { runner, paused, release };
  }

  async get(name: string): Promise<{ status: number; text: string }> {
    const r = await fetch(`${this.server.url}/v1/states/${name}`);
    return { status: r.status, text: await r.text() };
  }

  backend(method: string, path: string, body: string): Promise<Response> {
    return fetch(`${this.server.url}/v1/states/${path}`, {
      method,
      body,
      headers: { 'content-type': 'application/json' }, // as terraform sends them
    });
  }

  async commit(name: string, doc: object): Promise<void> {
    const r = await this.backend('POST', name, JSON.stringify(doc));
    if (r.status !== 200) throw new Error(`POST ${name}: ${r.status} ${await r.text()}`);
  }

  /** Rows through POST /v1/query (as kl_reader). */
  async query(sql: string, params: unknown[] = []): Promise<unknown[][]> {
    const r = await fetch(`${this.server.url}/v1/query`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ sql, params }),
    });
    const body = (await r.json()) as { rows: unknown[][] };
    if (r.status !== 200) throw new Error(`query answered ${r.status}: ${JSON.stringify(body)}`);
    return body.rows;
  }
}

/** Every read model's rows as JSON text, sorted, leaving out those of state `name`. */
async function rowsExcept(db: Database, name: string): Promise<Record<string, string[]>> {
  const [{ id }] = await db.query<{ id: string }>(
    'SELECT state_id::text AS id FROM states WHERE name = $1',
    [name],
  );
  const out: Record<string, string[]> = {};
  for (const table of readModelTables()) {
    const rows = await db.query<{ r: string }>(
      `SELECT to_jsonb(t)::text AS r FROM ${table} t
        WHERE to_jsonb(t) ->> 'state_id' IS DISTINCT FROM $1 ORDER BY 1`,
      [id],
    );
    out[table] = rows.map((row) => row.r);
  }
  return out;
}

/** Polls `done` until it holds or `ms` pass; says which. */
async function until(done: () => boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (!done()) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
  return true;
}

/**
 * Commits of one state of `count` instances over `versions` versions, each
 * changing `changed` instances, as the events the State decider writes.
 * Version 1 is the decider's own; later ones are made alike, and version 2
 * is checked against the decider so that the two cannot drift apart.
 */
function bigStateCommits(count: number, versions: number, changed: number): StateEvent[][] {
  const hash = (address: string, input: string) => `${address}=${input}`;
  const inputs = Array.from({ length: count }, () => 'v1');
  const command = (version: number): CommitState => {
    const document = testDocument(
      version,
      inputs.map((input, key) => ({ name: 'node', key, input })),
    );
    return {
      type: 'CommitState',
      data: {
        name: 'big',
        newStateId: '00000000-0000-4000-8000-00000000b1c0',
        document,
        source: 'http',
        checksum: `seed-${version}`,
        instances: flattenInstances(document, (address, _resource, instance) =>
          hash(address, (instance.attributes as { input: { value: string } }).input.value),
        ),
      },
      metadata: { actor: SEED.actor, correlationId: SEED.correlationId, now: SEED.occurredAt },
    };
  };

  const first = stateDecider.decide(command(1), stateDecider.initialState());
  const committed = first.find((e) => e.type === 'ApplyCommitted')!;
  const current = first
    .filter((e): e is LifecycleOpened => e.type === 'LifecycleOpened')
    .map((e) => e.data);
  const commits: StateEvent[][] = [first];
  for (let version = 2; version <= versions; version++) {
    const keys = new Set(
      Array.from({ length: changed }, (_, j) => (version * 7919 + j * 104_729) % count),
    );
    const closes: StateEvent[] = [];
    const opens: StateEvent[] = [];
    for (const key of keys) {
      const before = current[key];
      const input = `v${version}`;
      inputs[key] = input;
      const after = {
        ...before,
        version,
        serial: version,
        hash: hash(before.address, input),
        instance: {
          ...before.instance,
          attributes: { ...before.instance.attributes, input: { value: input, type: 'string' } },
        },
      };
      const { stateId, address } = before;
      closes.push({
        type: 'LifecycleClosed',
        data: { stateId, version, serial: version, address, hash: before.hash },
      });
      opens.push({ type: 'LifecycleOpened', data: after });
      current[key] = after;
    }
    const data = { ...committed.data, version, serial: version, checksum: `seed-${version}` };
    commits.push([{ type: 'ApplyCommitted', data } as StateEvent, ...closes, ...opens]);
    if (version === 2) {
      const state = first.reduce(stateDecider.evolve, stateDecider.initialState());
      const sorted = (events: StateEvent[]) => events.map((e) => JSON.stringify(e)).sort();
      expect(sorted(commits[1])).toEqual(sorted(stateDecider.decide(command(2), state)));
    }
  }
  return commits;
}
