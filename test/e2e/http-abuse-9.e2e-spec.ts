import * as net from 'node:net';
import { randomUUID } from 'node:crypto';
import { hostileTeams, HostileTeams, TEAM_A_STATE, TEAM_B_STATE } from '../support/hostile-teams';
import { lockInfo } from '../support/state-harness';
import { fuzzAnswer, fuzzInputs } from '../support/fuzz-inputs';
import { fuzzSeed, seededRandom } from '../support/seeded-random';
import { oneResourceState } from '../../bench/support/one-resource-state';

/**
 * Hostile sweep 9: a past version of a state is counted against its caller
 * and cut off when its reader stops; a run named by its id tells a token
 * that may not read its state nothing; a rebuild and a force-unlock refuse
 * what they would pass over; and seeded random requests against the inputs
 * no earlier fuzz reached.
 */

jest.setTimeout(300_000);

/**
 * kld's idle bound (KL_HTTP_IDLE_TIMEOUT; 65 s by default), after which a
 * reader that stopped is cut off: short, so that the test waits past it in
 * seconds, and long enough that four stalled readers are all still held when
 * a fifth asks (their versions are built side by side: 15 s on a loaded machine).
 */
const IDLE_S = 20;
/** How long past the bound a reader waits before reading again: kld checks every second. */
const MARGIN_S = 5;

const doc = (serial: number, count: number) =>
  oneResourceState({ serial, count, lineage: 'abuse9' });

/** A state of `bytes` in one output: a past version of it is built for each request. */
function bigState(serial: number, bytes: number) {
  return {
    version: 4,
    terraform_version: '1.11.0',
    serial,
    lineage: 'abuse9-big',
    outputs: { blob: { value: 'x'.repeat(bytes), type: 'string' } },
    resources: [],
  };
}

const isVisibleAscii = (c: string) => c >= ' ' && c <= '~';

/** A GET sent on its own socket whose reader stops after the first bytes. */
interface StalledReader {
  firstBytes: string;
  /** When it stopped reading (Date.now()). */
  stoppedAt: number;
  /** Reads again: what comes until kld closes the connection (or `waitMs` passes). */
  resume(waitMs: number): Promise<{ closed: boolean; bytes: number }>;
}

async function stalledGet(url: string, token: string, path: string): Promise<StalledReader> {
  const { hostname, port } = new URL(url);
  const socket = net.connect(Number(port), hostname);
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  let bytes = 0;
  const firstBytes = await new Promise<string>((resolve, reject) => {
    socket.once('data', (chunk: Buffer) => {
      bytes += chunk.length;
      socket.pause();
      resolve(chunk.toString('latin1'));
    });
    socket.once('close', () => reject(new Error(`kld closed ${path} before answering`)));
    socket.write(
      `GET ${path} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nAuthorization: Bearer ${token}\r\n\r\n`,
    );
  });
  return {
    firstBytes,
    stoppedAt: Date.now(),
    async resume(waitMs) {
      socket.on('data', (chunk: Buffer) => (bytes += chunk.length));
      socket.resume();
      let giveUp: NodeJS.Timeout | undefined;
      const ended = await Promise.race([
        closed.then(() => true),
        new Promise<boolean>((resolve) => (giveUp = setTimeout(() => resolve(false), waitMs))),
      ]);
      clearTimeout(giveUp);
      socket.destroy();
      return { closed: ended, bytes };
    },
  };
}

describe('hostile sweep 9', () => {
  let teams: HostileTeams;

  beforeAll(async () => {
    teams = await hostileTeams('kl_http_abuse9', doc(1, 20), doc(1, 3), {
      KL_HTTP_IDLE_TIMEOUT: `${IDLE_S}s`,
    });
  });

  afterAll(async () => {
    await teams?.stop();
  });

  it('a past version is an export of its caller: a fifth at once is a 429, a reader that stops is cut off', async () => {
    const { kld, admin, reader, writer, call } = teams;
    const bytes = 40_000_000;
    expect((await call(admin, 'POST', '/v1/states/team-a/big', bigState(1, bytes))).status).toBe(
      200,
    );
    expect((await call(admin, 'POST', '/v1/states/team-a/big', bigState(2, 10))).status).toBe(200);
    const path = '/v1/states/team-a/big?version=1';
    // Four readers of version 1 that stop after their first bytes: before, each held a
    // version of its own in kld (ten held 460 MB) for as long as it kept its connection.
    const stalled = await Promise.all([1, 2, 3, 4].map(() => stalledGet(kld.url, reader, path)));
    for (const s of stalled) expect(s.firstBytes).toMatch(/^HTTP\/1\.1 200 /);
    const fifth = await fetch(`${kld.url}${path}`, {
      headers: { Authorization: `Bearer ${reader}` },
    });
    expect(fifth.status).toBe(429);
    expect(fifth.headers.get('retry-after')).toBe('1');
    expect(((await fifth.json()) as { error: { code: string } }).error.code).toBe(
      'REQUEST.TOO_MANY',
    );
    // Another caller reads the same version whole meanwhile, and terraform is served.
    const other = await fetch(`${kld.url}${path}`, {
      headers: { Authorization: `Bearer ${writer}` },
    });
    expect(other.status).toBe(200);
    expect(JSON.parse(await other.text()).serial).toBe(1);
    await teams.unchanged();
    // Past kld's silent-reader bound (IDLE_S from the last byte taken) the four read
    // again: what kld had let go of before is all that comes, then the end.
    const lastStopped = Math.max(...stalled.map((s) => s.stoppedAt));
    const pastBound = lastStopped + (IDLE_S + MARGIN_S) * 1000 - Date.now();
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, pastBound)));
    const ends = await Promise.all(stalled.map((s) => s.resume(60_000)));
    for (const end of ends) {
      expect(end.closed).toBe(true);
      expect(end.bytes).toBeLessThan(bytes);
    }
    // Their slots are free again: the reader gets the version whole.
    const again = await fetch(`${kld.url}${path}`, {
      headers: { Authorization: `Bearer ${reader}` },
    });
    expect(again.status).toBe(200);
    expect((await again.text()).length).toBe(Number(again.headers.get('content-length')));
  });

  it('a run named by its id alone: a token that may not read its state is answered as for no run', async () => {
    const { reader, writer, other, call } = teams;
    const applyRun = await call(other, 'POST', `/v1/engine/states/${TEAM_B_STATE}/runs`, {
      operation: 'abuse9',
      base_version: 1,
      write: ['terraform_data.x[1]'],
    });
    expect(applyRun.status).toBe(201);
    const refreshRun = await call(other, 'POST', '/v1/refresh-runs', {
      state: TEAM_B_STATE,
      dry_run: true,
    });
    expect(refreshRun.status).toBe(201);
    const probes = (id: string) =>
      [
        [reader, 'GET', `/v1/api/apply-runs/${id}`],
        [writer, 'POST', `/v1/api/apply-runs/${id}/abort`],
        [reader, 'GET', `/v1/refresh-runs/${id}`],
        [writer, 'POST', `/v1/refresh-runs/${id}/results`, { results: [] }],
        [writer, 'POST', `/v1/refresh-runs/${id}/finish`, { status: 'succeeded' }],
      ] as const;
    const answer = async (token: string, method: string, path: string, body?: unknown) => {
      const r = await call(token, method, path, body);
      return { status: r.status, error: r.body?.error as { code: string; message: string } };
    };
    for (const [kind, id] of [
      ['apply', applyRun.body.run_id as string],
      ['refresh', refreshRun.body.run_id as string],
    ] as const) {
      const none = randomUUID();
      const real = probes(id).filter((p) => p[2].includes(kind === 'apply' ? 'apply' : 'refresh'));
      const fake = probes(none).filter((p) =>
        p[2].includes(kind === 'apply' ? 'apply' : 'refresh'),
      );
      for (let i = 0; i < real.length; i++) {
        const [token, method, path, body] = real[i];
        const got = await answer(token, method, path, body);
        const [fToken, fMethod, fPath, fBody] = fake[i];
        const expected = await answer(fToken, fMethod, fPath, fBody);
        // Before: 403 naming team-b/app, where a run that does not exist is a 404.
        expect({
          ...got,
          error: { ...got.error, message: got.error.message.replace(id, '<id>') },
        }).toEqual({
          ...expected,
          error: { ...expected.error, message: expected.error.message.replace(none, '<id>') },
        });
        expect(got.status).toBe(404);
        expect(got.error.message).not.toContain('team-b');
      }
    }
    // Nothing changed: both runs still run.
    const run = await call(other, 'GET', `/v1/api/apply-runs/${applyRun.body.run_id as string}`);
    expect(run.body.status).toBe('running');
    const refresh = await call(
      other,
      'GET',
      `/v1/refresh-runs/${refreshRun.body.run_id as string}`,
    );
    expect(refresh.body.status).toBe('running');
    // A token that may read the state (not write it) gets the 403 as before: it learns nothing.
    const viewerB = await call(teams.admin, 'POST', '/v1/admin/tokens', {
      name: 'team-b-viewer-9',
      scopes: ['read:team-b/*', 'write:team-a/*'],
    });
    const refused = await call(
      viewerB.body.token as string,
      'POST',
      `/v1/api/apply-runs/${applyRun.body.run_id as string}/abort`,
    );
    expect([refused.status, refused.body.error.code]).toEqual([403, 'AUTH.FORBIDDEN']);
    await call(other, 'POST', `/v1/api/apply-runs/${applyRun.body.run_id as string}/abort`);
  });

  it('a rebuild takes no body or parameter, a force-unlock no parameter: refused, nothing done', async () => {
    const { kld, admin, writer, call } = teams;
    const mark = kld.output().length;
    for (const [path, body] of [
      ['/v1/admin/projections/rebuild', { projector: 'state-catalog' }],
      ['/v1/admin/projections/rebuild?projector=state-catalog', undefined],
    ] as const) {
      const r = await call(admin, 'POST', path, body);
      expect([r.status, r.body.error.code]).toEqual([400, 'REQUEST.INVALID']);
    }
    // Before, either replayed the whole log into every read model.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(kld.output().slice(mark)).not.toContain('projection rebuilt');

    const lock = await fetch(`${kld.url}/v1/states/${TEAM_A_STATE}`, {
      method: 'LOCK',
      headers: { Authorization: `Bearer ${writer}`, 'Content-Type': 'application/json' },
      body: JSON.stringify(lockInfo('held-by-ci')),
    });
    expect(lock.status).toBe(200);
    const locked = async () =>
      ((await call(admin, 'GET', '/v1/api/locks')).body.locks as { name: string }[]).some(
        (l) => l.name === TEAM_A_STATE,
      );
    // `kl import` takes `?lock_id=`; a force-unlock given one released whoever's lock it found.
    const refused = await call(
      admin,
      'POST',
      `/v1/api/states/${TEAM_A_STATE}/force-unlock?lock_id=another`,
    );
    expect([refused.status, refused.body.error.code]).toEqual([400, 'REQUEST.INVALID']);
    expect(refused.body.error.message).toContain('lock_id');
    expect(await locked()).toBe(true);
    const released = await call(admin, 'POST', `/v1/api/states/${TEAM_A_STATE}/force-unlock`, {
      lock_id: 'held-by-ci',
    });
    expect([released.status, released.body.released]).toEqual([200, 'held-by-ci']);
    expect(await locked()).toBe(false);
  });

  describe('seeded random requests against the inputs no earlier fuzz reached', () => {
    // http-fuzz.e2e-spec.ts: terraform's routes, imports, provider configs, queries;
    // http-abuse-7.e2e-spec.ts: the listings, engine scope/slice/runs, apply-run and refresh
    // bodies, provider schemas, token creation. Here: the event stream's parameters and
    // Last-Event-ID, quotas, token revocation and listing, projection skips and rebuilds,
    // archive exports, dashboard files, resources by address, force-unlock, server-side
    // refresh, apply-run starts, runs by id, engine commits and finishes, and odd headers.
    const SEED = fuzzSeed(Math.floor(Math.random() * 2 ** 31));
    const REQUESTS = Number(process.env.KL_FUZZ_REQUESTS ?? 300);
    const random = seededRandom(SEED);
    const { int, pick, chance } = random;

    const TEXTS = [
      '',
      'a\u0000b',
      'x\ud800y',
      '😀 ü \u202e',
      '-1',
      '0',
      '1e400',
      '18446744073709551616',
      '0000000000000001-0000000000000001',
      'ffffffffffffffff-ffffffffffffffff',
      'end',
      'k'.repeat(10 * 1024),
      '*',
      '**/***/*?',
      'team-a/**',
      'terraform_data.x[0]',
      'module.m["k"].terraform_data.x[0]',
      'team-a/app',
      'team-b/app',
      '../../package.json',
      'true',
      'null',
      'StateCreated',
      'state-team-a/app',
    ];
    const { text, segment, mutated } = fuzzInputs(random, TEXTS, [
      'admin',
      'read:team-a/*',
      'write:*',
      'query',
      'events',
      'succeeded',
    ]);
    function query(keys: readonly string[]): string {
      const q = new URLSearchParams();
      for (let i = int(4); i > 0; i--) q.append(pick(keys), text());
      const s = q.toString();
      return s === '' ? '' : `?${s}`;
    }

    interface Request_ {
      token: string;
      method: string;
      path: string;
      body?: unknown;
      headers?: Record<string, string>;
    }
    function request(ids: { apply: string; refresh: string }): Request_ {
      const { admin, writer, reader } = teams;
      const state = pick([TEAM_A_STATE, 'team-a/fuzz9', `team-a/${segment(text())}`]);
      const runId = pick([ids.apply, ids.refresh, randomUUID(), segment(text())]);
      switch (int(14)) {
        case 0: {
          const headers: Record<string, string> = {};
          // A header carries visible ASCII only (fetch refuses the rest before sending).
          if (chance(0.5)) headers['Last-Event-ID'] = [...text()].filter(isVisibleAscii).join('');
          const q = new URLSearchParams({ follow: 'false' });
          for (let i = int(4); i > 0; i--)
            q.append(
              pick(['from', 'state', 'type', 'stream', 'limit', 'checkpoint_ms', 'x']),
              text(),
            );
          return { token: admin, method: 'GET', path: `/v1/events?${q.toString()}`, headers };
        }
        case 1:
          return {
            token: admin,
            method: 'POST',
            path: '/v1/quotas',
            body: mutated({ glob: 'team-z/*', max_resources: 100, soft_resources: 50 }),
          };
        case 2:
          return {
            token: pick([admin, reader]),
            method: pick(['GET', 'DELETE']),
            path: `/v1/quotas${pick(['', '/rules', '/check'])}${query(['glob', 'state', 'creates', 'deletes', 'x'])}`,
          };
        case 3:
          return {
            token: admin,
            method: pick(['GET', 'DELETE']),
            path: `/v1/admin/tokens${chance(0.5) ? `/${segment(text())}` : query(['all', 'x'])}`,
          };
        case 4:
          return {
            token: admin,
            method: 'POST',
            path: `/v1/admin/projections/${pick(['skip', 'rebuild'])}${query(['projector', 'x'])}`,
            // A rebuild with an empty body replays the log: only bodies it refuses go there.
            body: mutated({ projector: 'no-such-projector', position: 1, reason: 'fuzz' }),
          };
        case 5:
          return {
            token: reader,
            method: 'GET',
            path: `/v1/archives/${state}${query(['from', 'x'])}`,
          };
        case 6:
          return { token: reader, method: 'GET', path: `/ui/${segment(text())}` };
        case 7:
          return {
            token: reader,
            method: 'GET',
            path: `/v1/api/states/${state}/resources/${segment(text())}${query(['version', 'serial', 'x'])}`,
          };
        case 8:
          return {
            token: admin,
            method: 'POST',
            path: `/v1/api/states/${state}/force-unlock${chance(0.3) ? query(['lock_id']) : ''}`,
            body: mutated({ lock_id: 'not-held' }),
          };
        case 9:
          return {
            token: writer,
            method: 'POST',
            path: `/v1/states/${state}/refresh${chance(0.2) ? query(['dry_run', 'x']) : ''}`,
            body: mutated({ dry_run: true }),
          };
        case 10:
          return {
            token: writer,
            method: 'POST',
            path: `/v1/api/states/${state}/apply-runs`,
            body: mutated({
              run_id: randomUUID(),
              base_version: 1,
              write: ['terraform_data.x[2]'],
              read: [],
              lease_seconds: 30,
            }),
          };
        case 11:
          return {
            token: pick([reader, writer]),
            method: pick(['GET', 'POST']),
            path: pick([
              `/v1/api/apply-runs/${runId}`,
              `/v1/api/apply-runs/${runId}/abort`,
              `/v1/refresh-runs/${runId}`,
              `/v1/refresh-runs/${runId}/finish`,
              `/v1/api/states/${state}/apply-runs/${runId}/output-state`,
            ]),
            body: chance(0.5) ? undefined : mutated({ status: 'failed', error_summary: 'fuzz' }),
          };
        case 12:
          return {
            token: writer,
            method: 'POST',
            path: `/v1/engine/states/${state}/runs/${runId}/${pick(['commit', 'finish'])}`,
            body: mutated({
              base_version: 1,
              upserts: [],
              deletes: [pick(['terraform_data.x[0]', text()])],
              outputs: {},
              status: 'failed',
            }),
          };
        default: {
          // Odd headers on ordinary requests.
          const headers: Record<string, string> = {};
          const header = pick(['X-Request-Id', 'X-Kilolock-Actor', 'Content-Type', 'Accept']);
          headers[header] = pick([
            'k'.repeat(8 * 1024),
            'text/plain',
            'application/json; charset=latin1',
            'multipart/form-data; boundary=x',
            '../..',
            'a b',
            `${int(1e9)}`,
          ]);
          return {
            token: pick([reader, writer]),
            method: pick(['GET', 'POST']),
            path: pick([`/v1/api/states/${TEAM_A_STATE}/history`, '/v1/quotas/check?creates=1']),
            body: chance(0.5) ? undefined : mutated({ x: 1 }),
            headers,
          };
        }
      }
    }

    it(`answers ${REQUESTS} of them with 2xx or a 4xx JSON error, logs no error (seed ${SEED}, KL_FUZZ_SEED replays it)`, async () => {
      const { kld, writer, other, call } = teams;
      const apply = await call(writer, 'POST', `/v1/engine/states/${TEAM_A_STATE}/runs`, {
        operation: 'fuzz9',
        base_version: 1,
        write: ['terraform_data.x[19]'],
      });
      const refresh = await call(other, 'POST', '/v1/refresh-runs', {
        state: TEAM_B_STATE,
        dry_run: true,
      });
      const ids = { apply: apply.body.run_id as string, refresh: refresh.body.run_id as string };
      const mark = kld.output().length;
      const failures: string[] = [];
      for (let i = 0; i < REQUESTS; i++) {
        const r = request(ids);
        const controller = new AbortController();
        const answer = await fetch(`${kld.url}${r.path}`, {
          method: r.method,
          headers: {
            Authorization: `Bearer ${r.token}`,
            'Content-Type': 'application/json',
            ...r.headers,
          },
          body: r.body === undefined || r.method === 'GET' ? undefined : JSON.stringify(r.body),
          signal: controller.signal,
        }).catch((err: Error) => ({
          status: 0,
          headers: new Headers(),
          text: async () => err.message,
        }));
        const type = answer.headers.get('content-type') ?? '';
        if (answer.status === 200 && type.startsWith('text/event-stream')) {
          // The stream (follow=false) ends at the log's head; a subscriber may also leave.
          controller.abort();
          continue;
        }
        const body = await answer.text().catch((err: Error) => `(cut: ${err.message})`);
        const { json, refusedClearly } = fuzzAnswer(answer.status, body);
        const served =
          answer.status >= 200 &&
          answer.status < 300 &&
          (json !== null || r.path.startsWith('/ui/') || r.path.startsWith('/v1/archives/'));
        if (!served && !refusedClearly) {
          failures.push(
            `${r.method} ${r.path.slice(0, 200)} ${JSON.stringify(r.headers ?? {}).slice(0, 100)} -> ${answer.status} ${body.slice(0, 200)}`,
          );
        }
      }
      expect(failures).toEqual([]);
      const logged = kld
        .output()
        .slice(mark)
        .split('\n')
        .filter((line) => /"level":(50|60)|Unhandled|ERR_/.test(line));
      expect(logged).toEqual([]);
      // No secret in what was logged: no token past its prefix.
      for (const token of [teams.admin, teams.writer, teams.reader, teams.other]) {
        expect(kld.output()).not.toContain(token);
      }
      await call(writer, 'POST', `/v1/api/apply-runs/${ids.apply}/abort`);
    });
  });
});
