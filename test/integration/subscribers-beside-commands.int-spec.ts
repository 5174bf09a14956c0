import request from 'supertest';
import type { PoolClient } from 'pg';
import { BULK_DATABASE } from '../../src/app/event-store.module';
import { startServer, KldServer } from '../../src/app/server';
import { EVENT_FEED, EventFeed } from '../../src/application/events/event-feed';
import { EventFilter } from '../../src/application/events/event-filter';
import { loadConfig } from '../../src/infrastructure/config/config';
import type { Database } from '../../src/infrastructure/postgres/database';
import { lockInfo, testDocument } from '../support/state-harness';
import { createTestDatabase, quietLogger, TestDatabase } from '../support/test-database';

const SUBSCRIBERS = 8;
const INSTANCES = 300;

/**
 * Subscribers reading the log from its start, while their page reads cannot
 * go on, hold nothing terraform's commands or the projectors need: a LOCK,
 * a POST (a new version, projected before it answers) and an UNLOCK all
 * answer, and the subscribers then deliver the whole log, that version
 * included, in order.
 */
describe('subscribers catching up beside commands', () => {
  let t: TestDatabase;
  let server: KldServer;
  const http = () => request(server.app.getHttpServer());
  const doc = (serial: number) =>
    JSON.stringify(
      testDocument(
        serial,
        Array.from({ length: INSTANCES }, (_, i) => ({ name: `r${i}`, input: `v${serial}-${i}` })),
      ),
    );

  beforeAll(async () => {
    t = await createTestDatabase();
    server = await startServer(
      loadConfig({ KL_DATABASE_URL: t.url, KL_LISTEN: '127.0.0.1:0', KL_GRPC_LISTEN: 'off' }),
      quietLogger,
    );
    await http().post('/v1/states/team/long').set('Content-Type', 'application/json').send(doc(1));
  });
  afterAll(async () => {
    await server.close();
    await t.drop();
  });

  // The readers' own horizon (kl_log_horizon): the snapshot's xmin also waits for other
  // test files' transactions on the same server, one held open for seconds (event-feed's
  // late commit) can run this wait out, and the test went on regardless.
  const horizonAtHead = async () =>
    (
      await t.db.query<{ at: boolean }>(
        `SELECT NOT EXISTS (SELECT 1 FROM kl_events
            WHERE transaction_id >= kl_log_horizon()) AS at`,
      )
    )[0]!.at;

  it('a LOCK, a POST and an UNLOCK answer while every subscriber’s page read waits; then the subscribers get everything', async () => {
    const bulk = server.app.get<Database>(BULK_DATABASE);
    const feed = server.app.get<EventFeed>(EVENT_FEED);
    // Every connection the subscribers read pages on, taken: their reads wait.
    const held: PoolClient[] = [];
    for (let i = 0; i < bulk.pool.options.max!; i++) held.push(await bulk.pool.connect());
    const abort = new AbortController();
    const delivered: string[][] = [];
    const readers = Array.from({ length: SUBSCRIBERS }, async (_, n) => {
      delivered[n] = [];
      const items = await feed.open(
        { from: 'start', filter: EventFilter.compile(), follow: true, batch: 500 },
        abort.signal,
      );
      for await (const item of items) {
        if (item.kind === 'events') {
          delivered[n].push(...item.events.map((e) => `${e.type}@${e.position.globalPosition}`));
        }
        if (item.kind === 'caught-up') return;
      }
    });
    try {
      // Those reading wait for a connection; the others wait for their turn to read.
      for (let i = 0; i < 400 && bulk.pool.waitingCount === 0; i++) {
        await new Promise((r) => setTimeout(r, 25));
      }
      expect(bulk.pool.waitingCount).toBeGreaterThan(0);

      const info = JSON.stringify(lockInfo('8f5c2a43-0c53-4cf1-9d1e-0c2b7a5e0001'));
      await http()
        .lock('/v1/states/team/long')
        .set('Content-Type', 'application/json')
        .send(info)
        .expect(200);
      await http()
        .post('/v1/states/team/long?ID=8f5c2a43-0c53-4cf1-9d1e-0c2b7a5e0001')
        .set('Content-Type', 'application/json')
        .send(doc(2))
        .expect(200);
      await http()
        .unlock('/v1/states/team/long')
        .set('Content-Type', 'application/json')
        .send(info)
        .expect(200);
      // Read your write: the version is in the read models already.
      const got = await http().get('/v1/states/team/long').expect(200);
      expect((got.body as { serial: number }).serial).toBe(2);

      // All that while, not one subscriber read a page.
      expect(delivered.every((d) => d.length === 0)).toBe(true);
      expect(bulk.pool.waitingCount).toBeGreaterThan(0);
      // Readers see the log up to the oldest transaction still open (a
      // projector's, say): wait until that horizon has passed the UNLOCK's
      // event, so the head the subscribers catch up to is the whole log.
      for (let i = 0; i < 400 && !(await horizonAtHead()); i++) {
        await new Promise((r) => setTimeout(r, 25));
      }
      expect(await horizonAtHead()).toBe(true);
    } finally {
      for (const c of held) c.release();
    }
    await Promise.all(readers);
    abort.abort();

    const log = (
      await t.db.query<{ type: string; gp: string }>(
        `SELECT type, global_position AS gp FROM kl_events
          ORDER BY transaction_id, global_position`,
      )
    ).map((r) => `${r.type}@${r.gp}`);
    expect(log.filter((e) => e.startsWith('ApplyCommitted@'))).toHaveLength(2);
    for (const d of delivered) expect(d).toEqual(log);
  });
});
