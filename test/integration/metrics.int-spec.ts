import * as fs from 'node:fs';
import * as path from 'node:path';
import request from 'supertest';
import { startServer, KldServer } from '../../src/app/server';
import { EVENT_FEED, EventFeed } from '../../src/application/events/event-feed';
import { EventFilter } from '../../src/application/events/event-filter';
import { loadConfig } from '../../src/infrastructure/config/config';
import { ProjectionRunner } from '../../src/projections/projection-runner';
import { collectGrpc, collectSse, grpcEventsClient } from '../support/event-clients';
import { sample, samples } from '../support/prometheus-text';
import { lockInfo, testDocument } from '../support/state-harness';
import { createTestDatabase, quietLogger, TestDatabase } from '../support/test-database';

/** `/metrics` scraped after real requests: the numbers move as an operator expects. */
describe('GET /metrics', () => {
  let t: TestDatabase;
  let server: KldServer;
  const http = () => request(server.app.getHttpServer());
  const scrape = async () => {
    const r = await http().get('/metrics').expect(200);
    expect(r.headers['content-type']).toMatch(/^text\/plain/);
    return r.text;
  };
  const post = (name: string, body: string) =>
    http().post(`/v1/states/${name}`).set('Content-Type', 'application/json').send(body);

  beforeAll(async () => {
    t = await createTestDatabase();
    server = await startServer(
      loadConfig({
        KL_DATABASE_URL: t.url,
        KL_LISTEN: '127.0.0.1:0',
        KL_GRPC_LISTEN: '127.0.0.1:0',
      }),
      quietLogger,
    );
  });
  afterAll(async () => {
    await server.close();
    await t.drop();
  });

  it('counts a commit with its size, duration and the instances it changed', async () => {
    const before = await scrape();
    const first = JSON.stringify(
      testDocument(1, [
        { name: 'a', input: 'one' },
        { name: 'b', input: 'two' },
      ]),
    );
    await post('team/metrics', first).expect(200);
    const second = JSON.stringify(
      testDocument(2, [
        { name: 'a', input: 'one' },
        { name: 'b', input: 'changed' },
      ]),
    );
    await post('team/metrics', second).expect(200);
    // the same bytes again: a retry, no new version
    await post('team/metrics', second).expect(200);
    const after = await scrape();

    const decided = { outcome: 'decided' };
    const count = (text: string, name: string, labels = {}) =>
      sample(text, `${name}_count`, labels);
    const sum = (text: string, name: string, labels = {}) => sample(text, `${name}_sum`, labels);
    expect(count(after, 'kilolock_commit_duration_seconds', decided)).toBe(
      count(before, 'kilolock_commit_duration_seconds', decided) + 2,
    );
    expect(
      count(after, 'kilolock_commit_duration_seconds', { outcome: 'unchanged' }) -
        count(before, 'kilolock_commit_duration_seconds', { outcome: 'unchanged' }),
    ).toBe(1);
    expect(sum(after, 'kilolock_commit_duration_seconds', decided)).toBeGreaterThan(
      sum(before, 'kilolock_commit_duration_seconds', decided),
    );
    expect(
      sum(after, 'kilolock_commit_size_bytes') - sum(before, 'kilolock_commit_size_bytes'),
    ).toBe(Buffer.byteLength(first) + Buffer.byteLength(second));
    // two instances opened, then one changed
    expect(
      sum(after, 'kilolock_commit_instances_changed') -
        sum(before, 'kilolock_commit_instances_changed'),
    ).toBe(3);
    expect(
      sample(after, 'kilolock_events_appended_total', { type: 'ApplyCommitted' }) -
        sample(before, 'kilolock_events_appended_total', { type: 'ApplyCommitted' }),
    ).toBe(2);
    expect(
      count(after, 'kilolock_event_store_append_duration_seconds', { outcome: 'ok' }),
    ).toBeGreaterThanOrEqual(count(before, 'kilolock_event_store_append_duration_seconds') + 2);
  });

  it('labels requests by route template and status, never by state name', async () => {
    const before = await scrape();
    await http().get('/v1/states/team/metrics').expect(200);
    await http().get('/v1/states/team/nothing-here').expect(404);
    await http().get('/no/such/route').expect(404);
    const after = await scrape();
    const route = { method: 'GET', route: '/v1/states/*name' };
    const hist = 'kilolock_http_request_duration_seconds_count';
    expect(sample(after, hist, { ...route, status: '200' })).toBe(
      sample(before, hist, { ...route, status: '200' }) + 1,
    );
    expect(sample(after, hist, { ...route, status: '404' })).toBe(
      sample(before, hist, { ...route, status: '404' }) + 1,
    );
    expect(sample(after, hist, { route: '(none)', status: '404' })).toBe(
      sample(before, hist, { route: '(none)', status: '404' }) + 1,
    );
    expect(after).not.toMatch(/team\/metrics|nothing-here/);
  });

  it('counts a lock conflict', async () => {
    const before = await scrape();
    await http()
      .lock('/v1/states/team/locked')
      .set('Content-Type', 'application/json')
      .send(JSON.stringify(lockInfo('lock-a')))
      .expect(200);
    await http()
      .lock('/v1/states/team/locked')
      .set('Content-Type', 'application/json')
      .send(JSON.stringify(lockInfo('lock-b', 'bob@ci')))
      .expect(423);
    const after = await scrape();
    expect(sample(after, 'kilolock_lock_conflicts_total')).toBe(
      sample(before, 'kilolock_lock_conflicts_total') + 1,
    );
    const refused = { command: 'LockState', outcome: 'refused', code: 'STATE.LOCKED' };
    expect(sample(after, 'kilolock_command_duration_seconds_count', refused)).toBe(
      sample(before, 'kilolock_command_duration_seconds_count', refused) + 1,
    );
    expect(sample(after, 'kilolock_stream_queue_wait_seconds_count', { aggregate: 'state' })).toBe(
      sample(before, 'kilolock_stream_queue_wait_seconds_count', { aggregate: 'state' }) + 2,
    );
  });

  it('counts kl apply reservations, their conflicts, and its row-level commit', async () => {
    await post(
      'team/apply',
      JSON.stringify(
        testDocument(1, [
          { name: 'a', input: 'one' },
          { name: 'b', input: 'two' },
        ]),
      ),
    ).expect(200);
    const before = await scrape();
    const runs = '/v1/api/states/team/apply/apply-runs';
    const start = () =>
      http()
        .post(runs)
        .set('Content-Type', 'application/json')
        .send(JSON.stringify({ base_version: 1, write: ['terraform_data.b'] }));
    const first = await start().expect(201);
    const second = await start().expect(409);
    expect(second.body.error.code).toBe('RESERVATION.CONFLICT');
    await http()
      .post(`${runs}/${first.body.run_id}/commit`)
      .set('Content-Type', 'application/json')
      .send(
        JSON.stringify({
          base_version: 1,
          terraform_version: '1.11.4',
          deletes: ['terraform_data.b'],
        }),
      )
      .expect(200);
    const after = await scrape();
    const moved = (name: string, labels: Record<string, string> = {}) =>
      sample(after, name, labels) - sample(before, name, labels);
    expect(moved('kilolock_reservation_conflicts_total')).toBe(1);
    expect(moved('kilolock_reservation_events_total', { event: 'acquired' })).toBe(1);
    expect(moved('kilolock_reservation_events_total', { event: 'released' })).toBe(1);
    expect(
      moved('kilolock_commit_duration_seconds_count', { kind: 'delta', outcome: 'decided' }),
    ).toBe(1);
    expect(moved('kilolock_commit_instances_changed_sum', { kind: 'delta' })).toBe(1);
    // a delta commit is not a document commit
    expect(moved('kilolock_commit_duration_seconds_count', { kind: 'document' })).toBe(0);
  });

  it('counts a finished refresh run with its duration', async () => {
    const before = await scrape();
    const started = await http()
      .post('/v1/refresh-runs')
      .set('Content-Type', 'application/json')
      .send(JSON.stringify({ state: 'team/metrics', dry_run: true }))
      .expect(201);
    await http()
      .post(`/v1/refresh-runs/${started.body.run_id}/finish`)
      .set('Content-Type', 'application/json')
      .send(JSON.stringify({ status: 'cancelled' }))
      .expect(200);
    // the duration is recorded once the run's start is read back
    let after = await scrape();
    for (let i = 0; i < 50; i++) {
      if (sample(after, 'kilolock_refresh_run_duration_seconds_count') > 0) break;
      await new Promise((r) => setTimeout(r, 20));
      after = await scrape();
    }
    expect(sample(after, 'kilolock_refresh_runs_total', { status: 'cancelled' })).toBe(
      sample(before, 'kilolock_refresh_runs_total', { status: 'cancelled' }) + 1,
    );
    expect(
      sample(after, 'kilolock_refresh_run_duration_seconds_count', { status: 'cancelled' }),
    ).toBe(1);
  });

  it('reports the database pools and process metrics', async () => {
    const text = await scrape();
    expect(sample(text, 'kilolock_db_pool_max_connections', { pool: 'commands' })).toBe(20);
    expect(sample(text, 'kilolock_db_pool_max_connections', { pool: 'events' })).toBe(10);
    expect(
      sample(text, 'kilolock_db_pool_connections', { pool: 'commands', state: 'total' }),
    ).toBeGreaterThan(0);
    // opened by the first query only
    await http()
      .post('/v1/query')
      .set('Content-Type', 'application/json')
      .send(JSON.stringify({ sql: 'SELECT 1' }))
      .expect(200);
    expect(sample(await scrape(), 'kilolock_db_pool_max_connections', { pool: 'query' })).toBe(10);
    expect(samples(text, 'process_cpu_user_seconds_total')).toHaveLength(1);
    expect(samples(text, 'nodejs_heap_size_used_bytes')).toHaveLength(1);
  });

  it('counts event-feed subscribers and the lag of the furthest behind', async () => {
    const logged = Number(
      (await t.db.query<{ n: string }>('SELECT count(*) AS n FROM kl_events'))[0].n,
    );
    expect(logged).toBeGreaterThan(3);
    const idle = await scrape();
    expect(sample(idle, 'kilolock_event_subscribers', { transport: 'sse' })).toBe(0);
    expect(sample(idle, 'kilolock_event_subscribers', { transport: 'grpc' })).toBe(0);

    // A subscriber that has taken one event of the log, as the SSE controller reads the feed.
    const feed = server.app.get<EventFeed>(EVENT_FEED);
    const abort = new AbortController();
    const it = (
      await feed.open({ from: 'start', filter: EventFilter.compile(), follow: true }, abort.signal)
    )[Symbol.asyncIterator]();
    expect((await it.next()).value).toMatchObject({ kind: 'event' });
    const slow = await scrape();
    expect(sample(slow, 'kilolock_event_subscribers', { transport: 'sse' })).toBe(1);
    expect(sample(slow, 'kilolock_event_subscriber_lag_events', { transport: 'sse' })).toBe(
      logged - 1,
    );
    expect(
      sample(slow, 'kilolock_event_subscriber_lag_seconds', { transport: 'sse' }),
    ).toBeGreaterThan(0);

    // Caught up, it lags by nothing; one over SSE and one over gRPC count too.
    for (let item = await it.next(); ; item = await it.next()) {
      if (item.done || item.value.kind === 'caught-up') break;
    }
    const sse = collectSse(server.url, { follow: true });
    const rpc = grpcEventsClient(server.grpcAddress!);
    const grpcLive = collectGrpc(rpc.Subscribe({ origin: 'ORIGIN_START' }));
    for (let i = 0; i < 600; i++) {
      const both =
        sse.messages.some((m) => m.event === 'caught-up') &&
        grpcLive.messages.some((m) => m.kind === 'caught_up');
      if (both) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const caughtUp = await scrape();
    expect(sample(caughtUp, 'kilolock_event_subscribers', { transport: 'sse' })).toBe(2);
    expect(sample(caughtUp, 'kilolock_event_subscribers', { transport: 'grpc' })).toBe(1);
    for (const transport of ['sse', 'grpc']) {
      expect(sample(caughtUp, 'kilolock_event_subscriber_lag_events', { transport })).toBe(0);
      expect(sample(caughtUp, 'kilolock_event_subscriber_lag_seconds', { transport })).toBe(0);
    }

    // A refused position never counts; ended subscriptions stop counting.
    const refused = await fetch(
      `${server.url}/v1/events?follow=false&from=0000000000000001-0000000000000001`,
    );
    expect(refused.status).toBe(400);
    abort.abort();
    await it.return?.();
    await sse.stop();
    await grpcLive.stop();
    rpc.close();
    let open = -1;
    for (let i = 0; i < 50 && open !== 0; i++) {
      open = sample(await scrape(), 'kilolock_event_subscribers');
      if (open !== 0) await new Promise((r) => setTimeout(r, 100));
    }
    expect(open).toBe(0);
  });

  it('reports each projector caught up, then behind when events wait unapplied', async () => {
    // A command waits only for the projectors its events feed; the others'
    // loops pass its events a moment later: a bounded wait for them.
    let caughtUp = await scrape();
    for (let i = 0; i < 50; i++) {
      if (samples(caughtUp, 'kilolock_projection_lag_events').every((s) => s.value === 0)) break;
      await new Promise((r) => setTimeout(r, 100));
      caughtUp = await scrape();
    }
    const projectors = samples(caughtUp, 'kilolock_projection_lag_events');
    expect(projectors.map((s) => s.labels.projector).sort()).toEqual(
      server.app.get(ProjectionRunner).names().sort(),
    );
    for (const s of projectors) expect(s.value).toBe(0);
    expect(sample(caughtUp, 'kilolock_projection_lag_up')).toBe(1);

    // Nothing applies events any more: two stored by another writer stay unapplied.
    await server.app.get(ProjectionRunner).stop();
    await t.db.query(
      `INSERT INTO kl_events (stream_id, stream_revision, type, data, metadata, event_id, schema_version, created_at)
       VALUES ('other-1', 0, 'SomethingElse', '{}', '{}', gen_random_uuid(), 1, now() - interval '5 seconds'),
              ('other-2', 0, 'SomethingElse', '{}', '{}', gen_random_uuid(), 1, now())`,
    );
    const behind = await scrape();
    for (const name of server.app.get(ProjectionRunner).names()) {
      expect(sample(behind, 'kilolock_projection_lag_events', { projector: name })).toBe(2);
      expect(
        sample(behind, 'kilolock_projection_lag_seconds', { projector: name }),
      ).toBeGreaterThanOrEqual(5);
      expect(sample(behind, 'kilolock_projection_halted', { projector: name })).toBe(0);
    }
  });

  it('documents every metric it exports, and the dashboard queries only those', async () => {
    const text = await scrape();
    const exported = new Set([...text.matchAll(/^# TYPE (kilolock_\w+) /gm)].map((m) => m[1]));
    expect(exported.size).toBeGreaterThan(15);
    const root = path.join(__dirname, '..', '..');
    const docs = fs.readFileSync(path.join(root, 'docs', 'metrics.md'), 'utf8');
    for (const name of exported) expect(docs).toContain(`\`${name}\``);
    const dashboard = fs.readFileSync(path.join(root, 'deploy', 'grafana-dashboard.json'), 'utf8');
    const queried = [...dashboard.matchAll(/kilolock_\w+/g)].map((m) =>
      m[0].replace(/_(bucket|count|sum)$/, ''),
    );
    expect(queried.length).toBeGreaterThan(5);
    for (const name of queried) expect(exported).toContain(name);
  });
});
