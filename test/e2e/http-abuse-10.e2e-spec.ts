import * as net from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { bearer, grpcEventsClient } from '../support/event-clients';
import { fuzzInputs } from '../support/fuzz-inputs';
import { createToken } from '../support/json-call';
import { fuzzSeed, seededRandom } from '../support/seeded-random';
import { hostileTeams, HostileTeams, TEAM_A_STATE, TEAM_B_STATE } from '../support/hostile-teams';
import { oneResourceState } from '../../bench/support/one-resource-state';

/**
 * Hostile sweep 10: a query parameter a route would pass over is refused on
 * every route that takes a token (a `DELETE` of a state "at version 3"
 * deleted the whole state; a token's revocation "as a dry run" revoked it);
 * and HTTP/1.1 framing games (request smuggling's duplicate lengths and
 * transfer codings, absolute-form targets, overlong UTF-8, oversized paths)
 * are answered with a JSON refusal or as the request they are, never
 * mistaken for another; seeded random calls of the gRPC event service
 * (positions of other epochs, deadlines already past, filters and bounds
 * out of range) end with a status the caller can act on, and hold nothing.
 */

jest.setTimeout(120_000);

const doc = (serial: number, count: number) =>
  oneResourceState({ serial, count, lineage: 'abuse10' });

/** Sends `bytes` on one connection and collects what comes until kld closes it (or `waitMs`). */
function exchange(port: number, bytes: string, waitMs = 10_000): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(bytes));
    let text = '';
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(text);
    };
    const timer = setTimeout(done, waitMs);
    socket.on('data', (c: Buffer) => (text += c.toString('latin1')));
    socket.on('error', done);
    socket.on('close', done);
  });
}

const statuses = (text: string) =>
  [...text.matchAll(/HTTP\/1\.[01] (\d{3}) /g)].map((m) => Number(m[1]));

/** The JSON error bodies of the answers in `text` (Content-Length framed). */
const errorCodes = (text: string) =>
  [...text.matchAll(/"error":\{"code":"([A-Z_.]+)"/g)].map((m) => m[1]);

describe('hostile sweep 10', () => {
  let teams: HostileTeams;
  let port: number;

  beforeAll(async () => {
    teams = await hostileTeams('kl_http_abuse10', doc(1, 5), doc(1, 3));
    port = Number(new URL(teams.kld.url).port);
  });

  afterAll(async () => {
    await teams?.stop();
  });

  describe('a query parameter a route would pass over', () => {
    it('is refused on every route that takes a token, nothing done', async () => {
      const { admin, writer, reader, other, call } = teams;
      const runs = await call(writer, 'GET', '/v1/api/apply-runs');
      expect(runs.status).toBe(200);
      // Routes that take no query parameter, each asked with one it would have passed over.
      const refused: [string, string, string][] = [
        // Before: the whole state deleted, "version 3" passed over.
        [writer, 'DELETE', `/v1/states/${TEAM_A_STATE}?version=1`],
        // Before: team B's token revoked, the dry run passed over.
        [admin, 'DELETE', '/v1/admin/tokens/team-b-ci?dry_run=true'],
        // Before: the whole history exported from its first event.
        [reader, 'GET', `/v1/archives/${TEAM_A_STATE}?since=3`],
        // Before: the current document, a misspelt serial passed over.
        [reader, 'GET', `/v1/states/${TEAM_A_STATE}?serail=1`],
        [reader, 'GET', `/v1/states/${TEAM_A_STATE}?version=1&at=yesterday`],
        [reader, 'GET', '/v1/api/states?state=team-b/app'],
        [reader, 'GET', '/v1/api/locks?state=team-a/app'],
        [reader, 'GET', `/v1/api/states/${TEAM_A_STATE}/history?limit=1`],
        [reader, 'GET', '/v1/api/reservations?state=team-a/app'],
        [reader, 'GET', `/v1/engine/states/${TEAM_A_STATE}?version=1`],
        [admin, 'GET', '/v1/quotas/rules?glob=team-a/*'],
        [reader, 'GET', '/v1/dashboard/drift?state=team-a/app'],
        [admin, 'POST', '/v1/admin/projections/rebuild?projector=state-catalog'],
        [admin, 'POST', `/v1/api/states/${TEAM_A_STATE}/force-unlock?lock_id=x`],
      ];
      for (const [token, method, path] of refused) {
        const r = await call(token, method, path);
        expect([method, path, r.status, r.body?.error?.code]).toEqual([
          method,
          path,
          400,
          'REQUEST.INVALID',
        ]);
        expect(r.body.error.message).toMatch(/takes (no query parameters|only the query)/);
      }
      const lock = await call(writer, 'LOCK', `/v1/states/${TEAM_A_STATE}?ID=abc`, {
        ID: 'abc',
        Operation: 'OperationTypeApply',
      });
      expect([lock.status, lock.body.error.code]).toEqual([400, 'REQUEST.INVALID']);
      // Nothing done: the state whole and unlocked, team B's token still works.
      await teams.unchanged();
      expect((await call(reader, 'GET', '/v1/api/locks')).body.locks).toEqual([]);
      expect((await call(other, 'GET', `/v1/states/${TEAM_B_STATE}`)).status).toBe(200);
      // The parameters each route takes are still taken.
      expect((await call(reader, 'GET', `/v1/states/${TEAM_A_STATE}?version=1`)).status).toBe(200);
      const archive = await fetch(`${teams.kld.url}/v1/archives/${TEAM_A_STATE}`, {
        headers: { Authorization: `Bearer ${reader}` },
      });
      expect([archive.status, (await archive.text()).split('\n').length > 2]).toEqual([200, true]);
      const named = await call(reader, 'GET', `/v1/states/${TEAM_A_STATE}?Version=1`);
      expect(named.body.error.message).toBe(
        'GET /v1/states/*name takes only the query parameters serial, version (got "Version")',
      );
    });

    it('a body sent with a GET or a DELETE is refused too, nothing done', async () => {
      const { admin, reader, call } = teams;
      const source = 'hashicorp/aws';
      for (const alias of [undefined, 'west']) {
        const put = await call(admin, 'PUT', '/v1/provider-configs', {
          state: TEAM_A_STATE,
          source,
          alias,
          config: { region: alias ?? 'default' },
          skip_schema_check: true,
        });
        expect(put.status).toBe(200);
      }
      const configPath = `/v1/provider-configs?state=${TEAM_A_STATE}&source=${source}`;
      // Before: the default config removed, the alias in the body passed over.
      const removal = await call(admin, 'DELETE', configPath, { alias: 'west' });
      expect([removal.status, removal.body.error.code]).toEqual([400, 'REQUEST.INVALID']);
      expect(removal.body.error.message).toBe(
        'DELETE /v1/provider-configs takes no body: give what it takes in its path or query string',
      );
      expect((await call(admin, 'GET', configPath)).status).toBe(200);
      expect(
        (await call(admin, 'DELETE', `/v1/states/${TEAM_A_STATE}`, { serial: 9 })).status,
      ).toBe(400);
      // The current document's own route refuses it as the controller does.
      const body = '{"version":1}';
      const read = await exchange(
        port,
        `GET /v1/states/${TEAM_A_STATE} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${reader}\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
      );
      expect([statuses(read), errorCodes(read)]).toEqual([[400], ['REQUEST.INVALID']]);
      await teams.unchanged();
      expect((await call(admin, 'DELETE', configPath)).status).toBe(200);
      expect((await call(admin, 'GET', `${configPath}&alias=west`)).status).toBe(200);
    });

    it('is refused after the token is checked: without a valid one the answer is 401', async () => {
      const r = await fetch(`${teams.kld.url}/v1/archives/${TEAM_A_STATE}?since=3`);
      expect(r.status).toBe(401);
    });

    it('is passed over by the public routes a probe or a browser calls with its own', async () => {
      for (const path of [
        '/healthz?probe=1',
        '/readyz?probe=1',
        '/v1/version?x=1',
        '/ui/app.js?v=2',
      ]) {
        const r = await fetch(`${teams.kld.url}${path}`);
        await r.arrayBuffer();
        expect([path, r.status]).toEqual([path, 200]);
      }
    });
  });

  describe('HTTP/1.1 framing', () => {
    const auth = () => `Authorization: Bearer ${teams.writer}\r\n`;
    const commitBody = () => JSON.stringify(doc(2, 5));

    it('refuses a body framed two ways (smuggling), answering JSON and closing, nothing stored', async () => {
      const body = commitBody();
      const smuggled = `GET /v1/api/states HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth()}\r\n`;
      const framings = [
        // Two lengths that disagree.
        `Content-Length: ${body.length}\r\nContent-Length: 5\r\n`,
        // A length and a chunked coding: the length would leave the chunks' tail as a request.
        `Content-Length: ${body.length}\r\nTransfer-Encoding: chunked\r\n`,
        // A coding kld cannot decode, and one written to slip past a front proxy.
        'Transfer-Encoding: gzip, chunked\r\nTransfer-Encoding: identity\r\n',
        'Transfer-Encoding: xchunked\r\n',
        'Transfer-Encoding : chunked\r\n',
      ];
      for (const framing of framings) {
        const text = await exchange(
          port,
          `POST /v1/states/${TEAM_A_STATE} HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth()}` +
            `Content-Type: application/json\r\n${framing}\r\n` +
            `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n${smuggled}`,
        );
        const answered = statuses(text);
        // One answer, a refusal, and the connection closed: the smuggled GET never answered.
        expect([framing, answered.length, answered[0] >= 400 && answered[0] < 500]).toEqual([
          framing,
          1,
          true,
        ]);
        expect(errorCodes(text)).toHaveLength(1);
      }
      await teams.unchanged();
    });

    it('answers pipelined requests in order, each as itself', async () => {
      const get = (path: string, extra = '') =>
        `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth()}${extra}\r\n`;
      const text = await exchange(
        port,
        get(`/v1/states/${TEAM_A_STATE}`) +
          get('/v1/api/states?bogus=1') +
          get(`/v1/states/${TEAM_B_STATE}`) +
          get('/healthz', 'Connection: close\r\n'),
      );
      // Team B's state is not the writer's: a 403 in its place, not another's answer.
      expect(statuses(text)).toEqual([200, 400, 403, 200]);
    });

    it('takes an absolute-form target as its path; the Host header still decides (DNS rebinding)', async () => {
      const absolute = (host: string, token = auth()) =>
        exchange(
          port,
          `GET http://elsewhere.example/v1/states/${TEAM_A_STATE} HTTP/1.1\r\nHost: ${host}\r\n` +
            `${token}Connection: close\r\n\r\n`,
        );
      const text = await absolute('127.0.0.1');
      expect(statuses(text)).toEqual([200]);
      expect(JSON.parse(text.split('\r\n\r\n')[1]).serial).toBe(1);
      expect(statuses(await absolute('127.0.0.1', ''))).toEqual([401]);
      const rebound = await absolute('elsewhere.example');
      expect([statuses(rebound), errorCodes(rebound)]).toEqual([[403], ['REQUEST.FORBIDDEN_HOST']]);
    });

    it('refuses overlong UTF-8, lone surrogates and NUL in a name, and a path past 16 KiB, in JSON', async () => {
      const paths = [
        '/v1/states/team-a/%C0%AFapp', // an overlong "/"
        '/v1/states/team-a/%E0%80%AFapp', // the same in three bytes
        '/v1/states/team-a/%ED%A0%80', // a lone surrogate
        '/v1/states/team-a/%FF',
        '/v1/states/team-a/app%00',
        '/v1/archives/team-a/%C0%AE%C0%AE/team-b/app', // overlong dots
      ];
      for (const path of paths) {
        const r = await fetch(`${teams.kld.url}${path}`, {
          headers: { Authorization: `Bearer ${teams.admin}` },
        });
        const body = (await r.json()) as { error: { code: string } };
        expect([path, r.status, body.error.code]).toEqual([path, 400, 'REQUEST.INVALID']);
      }
      const long = await exchange(
        port,
        `GET /v1/states/team-a/${'a'.repeat(20_000)} HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth()}\r\n`,
      );
      expect(statuses(long)).toEqual([431]);
      expect(errorCodes(long)).toEqual(['REQUEST.TOO_LARGE']);
    });

    it('reads a token from the first Authorization header a request carries', async () => {
      const twice = (first: string, second: string) =>
        exchange(
          port,
          `POST /v1/admin/projections/rebuild HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${first}\r\n` +
            `Authorization: Bearer ${second}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`,
        );
      // A reader's token first, an admin's after: the reader's decides.
      expect(statuses(await twice(teams.reader, teams.admin))).toEqual([403]);
    });
  });
  describe('the gRPC event service, seeded', () => {
    const SEED = fuzzSeed(Math.floor(Math.random() * 2 ** 31));
    const CALLS = Number(process.env.KL_FUZZ_REQUESTS ?? 150);
    // What a caller can act on; INTERNAL, UNKNOWN or UNAVAILABLE would be kld's fault.
    const ACTIONABLE = new Set([
      grpc.status.OK,
      grpc.status.CANCELLED,
      grpc.status.INVALID_ARGUMENT,
      grpc.status.FAILED_PRECONDITION,
      grpc.status.DEADLINE_EXCEEDED,
      grpc.status.RESOURCE_EXHAUSTED,
      grpc.status.PERMISSION_DENIED,
      grpc.status.UNAUTHENTICATED,
    ]);

    /** One call, cut by the client after its first message or 150 ms; its end status and details. */
    function call(
      client: ReturnType<typeof grpcEventsClient>,
      method: 'Read' | 'Subscribe',
      request: object,
      token: string,
      deadline: Date,
    ): Promise<{ code: number; details: string }> {
      return new Promise((resolve) => {
        // The stub takes call options too (EventsClient's type names the first two only).
        const start = client[method].bind(client) as unknown as (
          request: object,
          metadata: grpc.Metadata,
          options: grpc.CallOptions,
        ) => grpc.ClientReadableStream<unknown>;
        const stream = start(request, bearer(token), { deadline });
        const timer = setTimeout(() => stream.cancel(), 150);
        stream.on('data', () => stream.cancel());
        stream.on('error', (err: grpc.ServiceError) => {
          clearTimeout(timer);
          resolve({ code: err.code, details: err.details });
        });
        stream.on('status', (status: grpc.StatusObject) => {
          clearTimeout(timer);
          resolve({ code: status.code, details: status.details });
        });
      });
    }

    it(`ends ${CALLS} hostile calls with a status a caller can act on, holds none, logs no error (seed ${SEED}, KL_FUZZ_SEED replays it)`, async () => {
      const { kld, admin, reader } = teams;
      const events = await createToken(kld.url, admin, 'team-a-feed', ['read:team-a/*', 'events']);
      const scraper = await createToken(kld.url, admin, 'scraper', ['metrics']);
      const client = grpcEventsClient(kld.grpc);
      const first = await new Promise<string>((resolve, reject) => {
        const stream = client.Read({ origin: 'ORIGIN_START', limit: 1 }, bearer(admin));
        stream.on('data', (m: { event?: { position: string } }) => {
          if (m.event) resolve(m.event.position);
        });
        stream.on('error', reject);
      });
      const [epoch, tail] = first.split('-');
      const r = seededRandom(SEED);
      const { int, pick, chance } = r;
      const { text } = fuzzInputs(
        r,
        ['', 'a b', '\u0000', '\ud800', 'é', '*', '**', 'team-a/*', 'x'.repeat(600)],
        ['team-a/app', 'team-b/app', 'StateCreated', 'ApplyCommitted', 'state-'],
      );
      const position = () =>
        pick([
          first,
          `${(parseInt(epoch, 16) + 1 + int(5)).toString(16).padStart(epoch.length, '0')}-${tail}`,
          `${epoch}-${'f'.repeat(tail.length)}`,
          `${first}-${first}`,
          first.toUpperCase(),
          ` ${first}`,
          '0',
          '-1',
          '18446744073709551616',
          'x'.repeat(int(2) ? 64 : 100_000),
          text(),
        ]);
      const uint = () => pick([0, 1, int(1000), 2 ** 31, 2 ** 32 - 1]);
      const list = () => Array.from({ length: pick([0, 1, 3, 101]) }, () => text());
      const failures: string[] = [];
      for (let i = 0; i < CALLS; i++) {
        const method = pick(['Read', 'Subscribe'] as const);
        const request: Record<string, unknown> = {
          ...(chance(0.5)
            ? { from: position() }
            : chance(0.5)
              ? { origin: pick(['ORIGIN_START', 'ORIGIN_END', 'ORIGIN_UNSPECIFIED', 7]) }
              : {}),
          ...(chance(0.5)
            ? { filter: { states: list(), stream_prefixes: list(), types: list() } }
            : {}),
          ...(chance(0.5) ? { max_batch: uint(), max_message_bytes: uint() } : {}),
          ...(method === 'Read' ? { limit: uint() } : { checkpoint_interval_ms: uint() }),
        };
        const token = pick([admin, events, events, reader, 'kl_' + 'A'.repeat(43), '']);
        // Now and then a deadline already past (0 included), else a short one.
        const deadline = chance(0.2)
          ? pick([new Date(0), new Date(Date.now() - 1)])
          : new Date(Date.now() + 2000);
        const end = await call(client, method, request, token, deadline);
        if (!ACTIONABLE.has(end.code) || /kl_[A-Za-z0-9_-]{20}/.test(end.details)) {
          failures.push(
            `${method} ${JSON.stringify(request).slice(0, 300)} -> ${end.code} ${end.details}`,
          );
        }
      }
      client.close();
      expect(failures).toEqual([]);
      // Nothing held: every subscription ended, and a new one is served a commit made after.
      let open = '';
      for (let i = 0; i < 50; i++) {
        const metrics = await fetch(`${kld.url}/metrics`, {
          headers: { Authorization: `Bearer ${scraper}` },
        });
        open = (await metrics.text())
          .split('\n')
          .filter((l) => l.startsWith('kilolock_event_subscribers{'))
          .join('\n');
        if (!/ [1-9]\d*$/m.test(open)) break;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      expect(open).toMatch(/transport="grpc"} 0/);
      expect(open).not.toMatch(/ [1-9]\d*$/m);
      const follower = grpcEventsClient(kld.grpc);
      const stream = follower.Subscribe(
        { origin: 'ORIGIN_END', filter: { states: ['team-a/*'] } },
        bearer(events),
      );
      // The log's end is taken when kld opens the call, which its caught-up marker says: a
      // commit made before then (a fixed half second was not always enough on a loaded
      // machine for the connection, the token's check and that look) lies before the end.
      let caughtUp!: () => void;
      const live = new Promise<void>((resolve) => (caughtUp = resolve));
      const delivered = new Promise<string>((resolve, reject) => {
        stream.on('data', (m: { kind: string; event?: { type: string } }) => {
          if (m.kind === 'caught_up') caughtUp();
          if (m.event) {
            resolve(m.event.type);
            stream.cancel();
          }
        });
        stream.on('error', (err: grpc.ServiceError) => {
          if (err.code !== grpc.status.CANCELLED) reject(err);
        });
      });
      delivered.catch(() => undefined);
      await Promise.race([live, delivered]);
      const lock = await teams.call(teams.writer, 'LOCK', `/v1/states/${TEAM_A_STATE}`, {
        ID: 'after-fuzz',
        Operation: 'OperationTypeApply',
      });
      expect(lock.status).toBe(200);
      expect(await delivered).toBe('LockAcquired');
      follower.close();
      expect(
        (
          await teams.call(teams.writer, 'UNLOCK', `/v1/states/${TEAM_A_STATE}`, {
            ID: 'after-fuzz',
          })
        ).status,
      ).toBe(200);
      const logged = kld
        .output()
        .split('\n')
        .filter((line) => /"level":(50|60)|Unhandled|ERR_/.test(line));
      expect(logged).toEqual([]);
      for (const token of [teams.admin, teams.writer, teams.reader, teams.other, events]) {
        expect(kld.output()).not.toContain(token);
      }
    });
  });
});
