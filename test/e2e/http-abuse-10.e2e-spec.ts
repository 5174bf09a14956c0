import * as net from 'node:net';
import { hostileTeams, HostileTeams, TEAM_A_STATE, TEAM_B_STATE } from '../support/hostile-teams';
import { oneResourceState } from '../../bench/support/one-resource-state';

/**
 * Hostile sweep 10: a query parameter a route would pass over is refused on
 * every route that takes a token (a `DELETE` of a state "at version 3"
 * deleted the whole state; a token's revocation "as a dry run" revoked it);
 * and HTTP/1.1 framing games (request smuggling's duplicate lengths and
 * transfer codings, absolute-form targets, overlong UTF-8, oversized paths)
 * are answered with a JSON refusal or as the request they are, never
 * mistaken for another.
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
});
