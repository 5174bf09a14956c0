import * as net from 'node:net';
import { bearer, collectGrpc, grpcEventsClient } from '../support/event-clients';
import { hostileTeams, HostileTeams, TEAM_A_STATE } from '../support/hostile-teams';
import { KldProcess, startKld } from '../support/kld-process';
import type { TestDatabase } from '../support/test-database';
import { createToken, eventCount, jsonCall } from '../support/json-call';
import { oneResourceState } from '../../bench/support/one-resource-state';
import { socketPost } from '../../bench/support/socket-post';

/**
 * Hostile sweep 6: the apply-runs listing against a history of big runs, a
 * refresh result's free-text fields. Each attack is made with a real token of
 * the weakest scope that reaches the route; kld answers it, stores nothing it
 * should not, and serves the others on.
 */

jest.setTimeout(180_000);

const PROVIDER = 'provider["terraform.io/builtin/terraform"]';

const doc = (serial: number, count: number) =>
  oneResourceState({ serial, count, lineage: 'abuse6' });

describe('hostile sweep 6', () => {
  let teams: HostileTeams;
  let t: TestDatabase;
  let kld: KldProcess;
  let admin: string;
  let writer: string;
  let reader: string;
  let other: string;
  const state = TEAM_A_STATE;

  beforeAll(async () => {
    teams = await hostileTeams('kl_http_abuse6', doc(1, 2000), doc(1, 3));
    ({ t, kld, admin, writer, reader, other } = teams);
  });

  afterAll(async () => {
    await teams?.stop();
  });

  const call = (token: string, method: string, path: string, body?: unknown) =>
    teams.call(token, method, path, body);
  const unchanged = () => teams.unchanged();

  it('the apply-runs listing gives each run a summary: a history of big runs stays small', async () => {
    // What `kl state rm` of 2,000 addresses records: each address a glob, a line of info.
    const write = Array.from({ length: 2000 }, (_, i) => `terraform_data.x[${i}]`);
    const info = { preview: write.map((a) => `- ${a}`) };
    const error = `${'e'.repeat(300)}\n${'second line '.repeat(5000)}`;
    const runs: string[] = [];
    for (let i = 0; i < 10; i++) {
      const started = await call(writer, 'POST', `/v1/engine/states/${state}/runs`, {
        operation: 'state rm',
        base_version: 1,
        write,
        read: ['terraform_data.y', 'terraform_data.z'],
        info,
      });
      expect(started.status).toBe(201);
      const id = started.body.run_id as string;
      const finished = await call(writer, 'POST', `/v1/engine/states/${state}/runs/${id}/finish`, {
        status: 'failed',
        error_summary: error,
      });
      expect(finished.status).toBe(200);
      runs.unshift(id);
    }

    const r = await fetch(`${kld.url}/v1/api/apply-runs?limit=10000`, {
      headers: { Authorization: `Bearer ${reader}` },
    });
    expect(r.status).toBe(200);
    const text = await r.text();
    // Whole, each run was about 180 KB (its write set, reservations and info): 1.8 MB.
    expect(text.length).toBeLessThan(10 * 1024);
    const listed = (JSON.parse(text) as { runs: Record<string, unknown>[] }).runs;
    expect(listed.map((run) => run.run_id)).toEqual(runs);
    for (const run of listed) {
      expect(run).toMatchObject({
        state,
        lane: 'state-engine',
        status: 'failed',
        write: { count: 2000, first: write.slice(0, 3) },
        read: { count: 2, first: ['terraform_data.y', 'terraform_data.z'] },
        error_summary: `${'e'.repeat(200)}…`,
      });
      for (const whole of ['write_set', 'read_set', 'reservations', 'info']) {
        expect(run).not.toHaveProperty(whole);
      }
    }
    // The run's own route still gives it whole.
    const one = await call(reader, 'GET', `/v1/api/apply-runs/${runs[0]}`);
    expect(one.status).toBe(200);
    expect(one.body.write_set).toEqual(write);
    expect(one.body.reservations).toHaveLength(2002);
    expect(one.body.info).toEqual({ ...info, state_engine_operation: 'state rm' });
    expect(one.body.error_summary).toBe(error);
    await unchanged();
  });

  describe('a refresh result', () => {
    const result = (extra: object) => ({
      address: 'terraform_data.x[0]',
      provider: PROVIDER,
      outcome: 'drifted',
      before_hash: 'b',
      after_hash: 'c',
      changed_paths: ['id'],
      ...extra,
    });
    const eventsOf = (run: string) => eventCount(kld.url, admin, `refresh-${run}`);

    it('with changed paths or an error no provider sends is a 400 naming it, nothing stored', async () => {
      const started = await call(writer, 'POST', '/v1/refresh-runs', { state, dry_run: true });
      expect(started.status).toBe(201);
      const run = started.body.run_id as string;
      const refused: [object, RegExp][] = [
        [
          { changed_paths: Array.from({ length: 100_001 }, (_, i) => `tags.k${i}`) },
          /results\[0\]\.changed_paths has 100001 paths, more than 100000/,
        ],
        [
          { changed_paths: ['id', 'x'.repeat(4097)] },
          /results\[0\]\.changed_paths has a path longer than 4096 characters \(at 1\)/,
        ],
        [
          { changed_paths: Array.from({ length: 5000 }, (_, i) => `${i}`.padEnd(4000, '.')) },
          /results\[0\]\.changed_paths has more than 16777216 characters in all/,
        ],
        [
          { outcome: 'failed', after_hash: null, changed_paths: [], error: 'e'.repeat(65537) },
          /results\[0\]\.error is longer than 65536 characters/,
        ],
      ];
      for (const [extra, why] of refused) {
        const r = await call(writer, 'POST', `/v1/refresh-runs/${run}/results`, {
          results: [result(extra)],
        });
        expect([r.status, r.body?.error?.code]).toEqual([400, 'REQUEST.INVALID']);
        expect(r.body.error.message).toMatch(why);
      }
      expect(await eventsOf(run)).toBe(1); // RefreshStarted alone

      // At the bounds, a result is taken.
      const paths = Array.from({ length: 4000 }, (_, i) => `${i}`.padEnd(4096, '.'));
      const taken = await call(writer, 'POST', `/v1/refresh-runs/${run}/results`, {
        results: [result({ changed_paths: paths })],
      });
      expect(taken.status).toBe(200);
      expect(await eventsOf(run)).toBe(2);
      const finished = await call(writer, 'POST', `/v1/refresh-runs/${run}/finish`, {
        status: 'cancelled',
      });
      expect(finished.status).toBe(200);
      await unchanged();
    });
  });

  it('gRPC connections count with HTTP against the open files: a flood leaves kld ready, committing and streaming', async () => {
    const low = await startKld({ KL_DATABASE_URL: t.url, KL_AUTH: 'on' }, 30_000, {
      openFiles: 512,
    });
    const grpcPort = Number(low.grpc!.split(':').pop());
    // An honest subscriber, connected before the flood (of small events: a client takes 4 MiB).
    const teamB = { origin: 'ORIGIN_START', filter: { states: ['team-b/*'] } };
    const client = grpcEventsClient(low.grpc!);
    const sockets: net.Socket[] = [];
    try {
      const first = collectGrpc(client.Read(teamB, bearer(admin)));
      await first.done;
      expect(first.messages.length).toBeGreaterThan(0);
      // Connections that never send a byte, more than kld may open files.
      await Promise.all(
        Array.from(
          { length: 600 },
          () =>
            new Promise<void>((resolve) => {
              const s = net.connect(grpcPort, '127.0.0.1', () => resolve());
              s.on('error', () => resolve());
              s.on('close', () => resolve());
              sockets.push(s);
            }),
        ),
      );
      // One more, once kld closed it (refused, or past its files) kld took the flood's before.
      await new Promise<void>((resolve) => {
        const probe = net.connect(grpcPort, '127.0.0.1');
        probe.on('error', () => undefined);
        probe.on('close', () => resolve());
      });
      const ready = await jsonCall(low.url, reader, 'GET', '/readyz');
      expect(ready).toMatchObject({ status: 200, body: { status: 'ready' } });
      const posted = await jsonCall(low.url, other, 'POST', '/v1/states/team-b/grpc', doc(1, 3));
      expect(posted.status).toBe(200);
      // The subscriber's connection is still served.
      const again = collectGrpc(client.Read(teamB, bearer(admin)));
      await again.done;
      expect(again.messages.length).toBeGreaterThan(first.messages.length);
    } finally {
      for (const s of sockets) s.destroy();
      client.close();
      await low.stop();
    }
  });

  it('a slice written in turns: clients gone mid-slice leave kld serving, a stop during a paused one is prompt', async () => {
    const own = await startKld({ KL_DATABASE_URL: t.url, KL_AUTH: 'on' });
    const big = doc(1, 5000);
    for (const instance of big.resources[0].instances) {
      (instance.attributes as Record<string, string>).pad = 'p'.repeat(2000);
    }
    const name = 'team-a/sliced';
    expect((await jsonCall(own.url, admin, 'POST', `/v1/states/${name}`, big)).status).toBe(200);
    const body = JSON.stringify({ selectors: [{ type: 'terraform_data' }] });
    const port = Number(new URL(own.url).port);
    /** A slice request whose first bytes of answer have come; the socket then paused. */
    const sliceStarted = () =>
      new Promise<net.Socket>((resolve, reject) => {
        const socket = net.connect(port, '127.0.0.1');
        socket.on('error', () => undefined);
        socket.once('data', () => {
          socket.pause();
          resolve(socket);
        });
        socket.once('close', () => reject(new Error('kld closed the slice before answering')));
        socket.write(
          `POST /v1/engine/states/${name}/slice HTTP/1.1\r\nHost: 127.0.0.1\r\n` +
            `Authorization: Bearer ${reader}\r\nContent-Type: application/json\r\n` +
            `Content-Length: ${body.length}\r\n\r\n${body}`,
        );
      });
    const mark = own.output().length;
    try {
      // Gone after the first bytes, one after another and many at once.
      for (let i = 0; i < 10; i++) (await sliceStarted()).destroy();
      const many = await Promise.all(Array.from({ length: 4 }, sliceStarted));
      for (const socket of many) socket.destroy();
      const whole = await fetch(`${own.url}/v1/engine/states/${name}/slice`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${reader}`, 'Content-Type': 'application/json' },
        body,
      });
      expect(whole.status).toBe(200);
      expect(whole.headers.get('x-kilolock-slice-instances')).toBe('5000');
      expect((JSON.parse(await whole.text()) as typeof big).resources[0].instances).toHaveLength(
        5000,
      );
      const logged = own
        .output()
        .slice(mark)
        .split('\n')
        .filter((line) => /"level":(50|60)|Unhandled|ERR_STREAM/.test(line));
      expect(logged).toEqual([]);

      // A stop while a slice's reader has stopped reading.
      const paused = await sliceStarted();
      const { code } = await own.stop();
      paused.destroy();
      expect(code).toBe(0);
      expect(own.output()).toContain('"msg":"stopped"');
      expect(own.output()).not.toContain('shutdown took too long');
    } finally {
      await own.stop();
    }
  });

  it("the provider schema cache: a revoked token's schema serves nobody, its name is never another's", async () => {
    const schema = (description: string) => ({
      protocolVersion: 5,
      provider: { block: { attributes: [], blockTypes: [], description } },
      resourceSchemas: {},
      dataSourceSchemas: {},
    });
    const key = 'source=registry.terraform.io/acme/cloud&version=1.0.0';
    const put = (token: string, description: string) =>
      call(token, 'PUT', '/v1/provider-schemas', {
        source: 'registry.terraform.io/acme/cloud',
        version: '1.0.0',
        schema: schema(description),
      });
    const gone = await createToken(kld.url, admin, 'schema-writer', ['write:team-a/*']);
    expect((await put(gone, 'wrong')).status).toBe(200);
    expect((await call(gone, 'GET', `/v1/provider-schemas?${key}`)).status).toBe(200);
    expect((await call(admin, 'DELETE', '/v1/admin/tokens/schema-writer')).status).toBe(200);
    expect((await call(gone, 'GET', `/v1/provider-schemas?${key}`)).status).toBe(401);
    // Nobody else reads it, and the name cannot come back to claim it.
    for (const token of [writer, reader, admin]) {
      const r = await call(token, 'GET', `/v1/provider-schemas?${key}`);
      expect([r.status, r.body.error.code]).toEqual([404, 'PROVIDER_SCHEMA.NOT_FOUND']);
    }
    const again = await call(admin, 'POST', '/v1/admin/tokens', {
      name: 'schema-writer',
      scopes: ['write:team-a/*'],
    });
    expect(again.status).toBe(409);
    // A trusted schema stored after is everyone's.
    expect((await put(admin, 'right')).status).toBe(200);
    const read = await call(writer, 'GET', `/v1/provider-schemas?${key}`);
    expect(read.body.schema.provider.block.description).toBe('right');
  });

  it('a stop while a big commit is being stored: answered as stored, or not stored at all', async () => {
    const own = await startKld({ KL_DATABASE_URL: t.url, KL_AUTH: 'on' });
    const body = JSON.stringify({ ...doc(1, 20_000), lineage: 'stopped' });
    const { answer, closed } = await socketPost(
      own.url,
      '/v1/states/team-a/stopped',
      { Authorization: `Bearer ${writer}` },
      body,
    );
    const { code } = await own.stop();
    await closed;
    expect(code).toBe(0);
    expect(answer()).not.toMatch(/^HTTP\/1\.1 5/);
    const after = await startKld({ KL_DATABASE_URL: t.url, KL_AUTH: 'on' });
    try {
      const r = await jsonCall(after.url, reader, 'GET', '/v1/states/team-a/stopped');
      if (answer().startsWith('HTTP/1.1 200 ')) expect(r.status).toBe(200);
      // Whole or nothing.
      if (r.status === 200) expect(r.body.resources[0].instances).toHaveLength(20_000);
      else expect(r.status).toBe(404);
    } finally {
      await after.stop();
    }
  });
});
