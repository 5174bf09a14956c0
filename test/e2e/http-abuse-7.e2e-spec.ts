import * as grpc from '@grpc/grpc-js';
import * as net from 'node:net';
import { bearer, collectGrpc, grpcEventsClient } from '../support/event-clients';
import { hostileTeams, HostileTeams, TEAM_A_STATE } from '../support/hostile-teams';
import { KldProcess, startKld } from '../support/kld-process';
import type { TestDatabase } from '../support/test-database';
import { createToken, eventCount, jsonCall } from '../support/json-call';
import { oneResourceState } from '../../bench/support/one-resource-state';
import { socketPost } from '../../bench/support/socket-post';
import { fuzzAnswer, fuzzInputs } from '../support/fuzz-inputs';
import { fuzzSeed, seededRandom } from '../support/seeded-random';

/**
 * Hostile sweep 7: a refresh finish's free text, an event too big for a gRPC
 * client, a stop while a refresh commits a big document, the apply-runs
 * listing's parameters and globs, the HTTP port spoken to in HTTP/2, SSE
 * subscribers that leave mid-turn, and seeded random requests against the
 * routes no earlier fuzz reached. Each attack uses a real token of the
 * weakest scope that reaches the route; kld answers it, stores nothing it
 * should not, and serves the others on.
 */

jest.setTimeout(240_000);

const PROVIDER = 'provider["terraform.io/builtin/terraform"]';
const MiB = 1024 * 1024;

const doc = (serial: number, count: number, lineage = 'abuse7', pad = 0) =>
  oneResourceState({
    serial,
    count,
    lineage,
    attributes: (i) => ({ id: `id-${i}`, ...(pad > 0 ? { pad: 'p'.repeat(pad) } : {}) }),
  });

describe('hostile sweep 7', () => {
  let teams: HostileTeams;
  let t: TestDatabase;
  let kld: KldProcess;
  let admin: string;
  let writer: string;
  let reader: string;
  let watcher: string;
  const state = TEAM_A_STATE;

  beforeAll(async () => {
    teams = await hostileTeams('kl_http_abuse7', doc(1, 20), doc(1, 3));
    ({ t, kld, admin, writer, reader } = teams);
    watcher = await createToken(kld.url, admin, 'team-a-watcher', ['read:team-a/*', 'events']);
  });

  afterAll(async () => {
    await teams?.stop();
  });

  const call = (token: string, method: string, path: string, body?: unknown) =>
    teams.call(token, method, path, body);
  const unchanged = () => teams.unchanged();

  const eventsOf = (stream: string) => eventCount(kld.url, admin, stream);

  it("a refresh finish's error_summary is bounded as a result's error: past it a 400, nothing stored", async () => {
    const started = await call(writer, 'POST', '/v1/refresh-runs', { state, dry_run: true });
    expect(started.status).toBe(201);
    const run = started.body.run_id as string;
    const over = await call(writer, 'POST', `/v1/refresh-runs/${run}/finish`, {
      status: 'failed',
      error_summary: 'e'.repeat(65_537),
    });
    expect([over.status, over.body?.error?.code]).toEqual([400, 'REQUEST.INVALID']);
    expect(over.body.error.message).toMatch(/error_summary is longer than 65536 characters/);
    // A 16 MiB one took the same way before: stored whole, and served to every reader.
    const huge = await call(writer, 'POST', `/v1/refresh-runs/${run}/finish`, {
      status: 'failed',
      error_summary: 'e'.repeat(16 * MiB),
    });
    expect(huge.status).toBe(400);
    expect(await eventsOf(`refresh-${run}`)).toBe(1); // RefreshStarted alone
    expect((await call(reader, 'GET', `/v1/refresh-runs/${run}`)).body.status).toBe('running');

    // At the bound, it is taken.
    const at = await call(writer, 'POST', `/v1/refresh-runs/${run}/finish`, {
      status: 'failed',
      error_summary: 'e'.repeat(65_536),
    });
    expect(at.status).toBe(200);
    const finished = await call(reader, 'GET', `/v1/refresh-runs/${run}`);
    expect(finished.body.status).toBe('failed');
    expect(finished.body.error_summary).toHaveLength(65_536);
    await unchanged();
  });

  describe('an event bigger than a gRPC client takes', () => {
    const big = 'team-a/big';

    beforeAll(async () => {
      const document = doc(1, 1, 'big');
      (document.resources[0].instances[0].attributes as Record<string, string>).blob = 'b'.repeat(
        5 * MiB,
      );
      expect((await call(writer, 'POST', `/v1/states/${big}`, document)).status).toBe(200);
      // A small event after it, to resume to.
      expect((await call(writer, 'POST', `/v1/states/${big}`, doc(2, 1, 'big'))).status).toBe(200);
    });

    const read = (request: object, options: grpc.ChannelOptions = {}) => {
      const client = grpcEventsClient(kld.grpc, grpc.credentials.createInsecure(), options);
      const collected = collectGrpc(
        client.Read({ filter: { states: [big] }, ...request }, bearer(watcher)),
      );
      return {
        ...collected,
        done: collected.done.finally(() => client.close()),
      };
    };

    /** The call's end, or null if it ended well. */
    const ending = (done: Promise<void>) =>
      done.then(
        () => null,
        (e: grpc.ServiceError) => e,
      );
    const TOO_LARGE =
      /^EVENTS\.TOO_LARGE: the event at position (\S+) \((\w+) of state-team-a\/big\) needs a message of (\d+) bytes, more than this call's max_message_bytes \(4194304;/;
    let passedOver = 0;

    it("ends a default client's call naming the event, so it can resume past it", async () => {
      for (const batching of [{}, { max_batch: 100 }]) {
        const first = read({ origin: 'ORIGIN_START', ...batching });
        const err = await ending(first.done);
        // The client's own limit ended it with RESOURCE_EXHAUSTED before, naming nothing, and
        // every resume met the same event again.
        expect(err?.code).toBe(grpc.status.FAILED_PRECONDITION);
        const match = TOO_LARGE.exec(err!.details);
        expect(match).not.toBeNull();
        expect(Number(match![3])).toBeGreaterThan(5 * MiB);
        expect(err!.metadata.get('kl-oversized-position')).toEqual([match![1]]);
        // Every event before it was sent, none after.
        for (const m of first.messages) expect(m.position < match![1]).toBe(true);
      }
      // Resuming from each named position passes over that event, to the head.
      let from: { origin: string } | { from: string } = { origin: 'ORIGIN_START' };
      for (let i = 0; i < 10; i++) {
        const next = read(from);
        const err = await ending(next.done);
        if (err === null) {
          expect(next.messages.at(-1)?.kind).toBe('caught_up');
          break;
        }
        const match = TOO_LARGE.exec(err.details);
        expect(match).not.toBeNull();
        passedOver++;
        from = { from: match![1] };
      }
      expect(passedOver).toBeGreaterThan(0);
    });

    it('gives it to a client that raised its limit and says so', async () => {
      const raised = read(
        { origin: 'ORIGIN_START', max_message_bytes: 64 * MiB },
        { 'grpc.max_receive_message_length': 64 * MiB },
      );
      await raised.done;
      expect(raised.messages.at(-1)?.kind).toBe('caught_up');
      const bigOnes = raised.messages.filter(
        (m) => String(m.event?.data_json ?? '').length > 4 * MiB,
      );
      expect(bigOnes).toHaveLength(passedOver);
      // A limit below the default is refused before any message.
      const low = read({ origin: 'ORIGIN_START', max_message_bytes: 1024 });
      await expect(low.done).rejects.toMatchObject({
        code: grpc.status.INVALID_ARGUMENT,
        details: expect.stringMatching(/max_message_bytes is at least 4194304/),
      });
      expect(low.messages).toEqual([]);
    });
  });

  it('a stop while a refresh commits a big document: whole or not at all, and within its bound', async () => {
    const name = 'team-a/refreshed';
    // 5,000 instances: a finish that ends within the 5 s grace. One whose projection outlasts
    // the grace is cut short by the stop: stop-mid-projection.e2e-spec.ts.
    const own = await startKld({ KL_DATABASE_URL: t.url, KL_AUTH: 'on' });
    expect(
      (await jsonCall(own.url, writer, 'POST', `/v1/states/${name}`, doc(1, 5_000, 'r'))).status,
    ).toBe(200);
    const started = await jsonCall(own.url, writer, 'POST', '/v1/refresh-runs', { state: name });
    expect(started.status).toBe(201);
    const run = started.body.run_id as string;
    const refreshed = doc(2, 5_000, 'r');
    for (const instance of refreshed.resources[0].instances) {
      (instance.attributes as Record<string, string>).id += '-refreshed';
    }
    const body = JSON.stringify({ status: 'succeeded', document: refreshed });
    const { answer, closed } = await socketPost(
      own.url,
      `/v1/refresh-runs/${run}/finish`,
      { Authorization: `Bearer ${writer}` },
      body,
    );
    const { code } = await own.stop();
    await closed;
    expect(code).toBe(0);
    expect(own.output()).not.toContain('shutdown took too long');
    expect(answer()).not.toMatch(/^HTTP\/1\.1 5/);

    const r = await call(reader, 'GET', `/v1/states/${name}`);
    expect(r.status).toBe(200);
    // Whole: every instance of one serial or the other, never a mix.
    expect(r.body.resources[0].instances).toHaveLength(5_000);
    const ids = new Set(
      r.body.resources[0].instances.map((i: { attributes: { id: string } }) =>
        i.attributes.id.endsWith('-refreshed'),
      ),
    );
    expect([...ids]).toEqual([r.body.serial === 2]);
    const runNow = await call(reader, 'GET', `/v1/refresh-runs/${run}`);
    if (answer().startsWith('HTTP/1.1 200 ')) {
      expect([r.body.serial, runNow.body.status]).toEqual([2, 'succeeded']);
    }
    if (runNow.body.status === 'running') {
      // Cut before its answer: the finish sent again ends it, the document committed once.
      const again = await call(writer, 'POST', `/v1/refresh-runs/${run}/finish`, {
        status: 'succeeded',
        document: refreshed,
      });
      expect(again.status).toBe(200);
    }
    // One version made by the refresh, however many finishes it took.
    const head = await call(reader, 'GET', `/v1/engine/states/${name}`);
    expect([head.status, head.body.version]).toEqual([200, 2]);
    const after = await call(reader, 'GET', `/v1/states/${name}`);
    expect(after.body.serial).toBe(2);
    expect((await call(reader, 'GET', `/v1/refresh-runs/${run}`)).body.status).toBe('succeeded');
  });

  describe('the apply-runs listing', () => {
    it('takes each parameter once, as digits or a state name; anything else is a 400', async () => {
      const refused = [
        'limit=-1',
        'limit=0',
        'limit=10001',
        'limit=1e3',
        'limit=%205',
        'limit=0x10',
        'limit=5.0',
        'limit=abc',
        'limit=99999999999999999999999',
        'limit=5&limit=6',
        'limit[]=5',
        'limit[a]=5',
        'state=team-a/app&state=team-a/app',
        'state[]=team-a/app',
        'state=team-a/%00',
        `state=team-a/${'n'.repeat(10 * 1024)}`,
        'cursor=abc',
        'after=abc',
      ];
      for (const query of refused) {
        const r = await call(reader, 'GET', `/v1/api/apply-runs?${query}`);
        expect([query, r.status, r.body?.error?.code]).toEqual([query, 400, 'REQUEST.INVALID']);
      }
      for (const query of ['', 'limit=', 'state=', 'limit=10000', `state=${state}&limit=1`]) {
        const r = await call(reader, 'GET', `/v1/api/apply-runs?${query}`);
        expect([query, r.status]).toEqual([query, 200]);
      }
      // A state it may not read: 403, as everywhere.
      expect((await call(reader, 'GET', '/v1/api/apply-runs?state=team-b/app')).status).toBe(403);
      const unicode = await call(
        reader,
        'GET',
        `/v1/api/apply-runs?state=team-a/${encodeURIComponent('ü😀')}`,
      );
      expect([200, 400]).toContain(unicode.status);
      await unchanged();
    });

    it('summarises runs of odd globs; a glob no address can be is refused, nothing stored', async () => {
      const odd = [
        'terraform_data.x["ü→😀"]',
        `terraform_data.x["${'k'.repeat(700)}"]`,
        'module.m["\\u0001"].terraform_data.x',
        'module.m.*',
      ];
      const started = await call(writer, 'POST', `/v1/engine/states/${state}/runs`, {
        operation: 'state rm',
        base_version: 1,
        write: odd,
      });
      expect(started.status).toBe(201);
      const id = started.body.run_id as string;
      for (const bad of [
        `terraform_data.x["${'k'.repeat(10 * 1024)}"]`,
        'terraform_data.x\u0000',
      ]) {
        const r = await call(writer, 'POST', `/v1/engine/states/${state}/runs`, {
          operation: 'state rm',
          base_version: 1,
          write: [bad],
        });
        expect(r.status).toBe(400);
        expect(r.body.error.code).toMatch(/INVALID/);
      }
      const listed = await call(reader, 'GET', `/v1/api/apply-runs?state=${state}`);
      expect(listed.status).toBe(200);
      expect(listed.body.runs).toHaveLength(1);
      expect(listed.body.runs[0]).toMatchObject({
        run_id: id,
        write: { count: 4, first: odd.slice(0, 3) },
      });
      const finished = await call(writer, 'POST', `/v1/engine/states/${state}/runs/${id}/finish`, {
        status: 'aborted',
      });
      expect(finished.status).toBe(200);
      await unchanged();
    });
  });

  it('HTTP/2 and garbage on the HTTP port, HTTP/1.1 on the gRPC port: refused, both served on', async () => {
    const httpPort = Number(new URL(kld.url).port);
    const grpcPort = Number(kld.grpc.split(':').pop());
    const exchange = (port: number, bytes: string | Buffer) =>
      new Promise<string>((resolve) => {
        let got = '';
        const s = net.connect(port, '127.0.0.1', () => s.write(bytes));
        s.on('data', (d: Buffer) => (got += d.toString('latin1')));
        s.on('error', () => undefined);
        s.on('close', () => resolve(got));
        // A server that keeps a connection it cannot use open is what this looks for.
        s.setTimeout(10_000, () => {
          got += '(kept open)';
          s.destroy();
        });
      });
    const preface = 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n';
    const settings = Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]);
    const h2 = await exchange(httpPort, Buffer.concat([Buffer.from(preface), settings]));
    expect(h2).toMatch(/^HTTP\/1\.1 4\d\d /);
    expect(h2).not.toContain('(kept open)');
    const junk = await exchange(httpPort, '\u0000\u0001\u0002 GARBAGE\r\n\r\n');
    expect(junk).toMatch(/^HTTP\/1\.1 400 /);
    const h1 = await exchange(grpcPort, 'GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(h1).not.toContain('(kept open)');
    await unchanged();
    const client = grpcEventsClient(kld.grpc);
    try {
      const ok = collectGrpc(
        client.Read({ origin: 'ORIGIN_START', filter: { states: ['team-b/*'] } }, bearer(admin)),
      );
      await ok.done;
      expect(ok.messages.at(-1)?.kind).toBe('caught_up');
    } finally {
      client.close();
    }
  });

  it('500 SSE subscribers that leave while catching up: nothing held, the next one served', async () => {
    const own = await startKld({ KL_DATABASE_URL: t.url, KL_AUTH: 'off' });
    const sse = (actor: string, from: string, signal: AbortSignal) =>
      fetch(`${own.url}/v1/events?from=${from}`, {
        headers: { 'X-Kilolock-Actor': actor, Accept: 'text/event-stream' },
        signal,
      });
    try {
      let n = 0;
      for (let wave = 0; wave < 10; wave++) {
        const statuses = await Promise.all(
          Array.from({ length: 50 }, async () => {
            const abort = new AbortController();
            const r = await sse(`leaver-${n++}`, '', abort.signal);
            // Gone after the headers, or after a first piece of the log.
            if (n % 2 === 0) await r.body?.getReader().read();
            abort.abort();
            return r.status;
          }),
        );
        expect(new Set(statuses)).toEqual(new Set([200]));
      }
      const subscribers = async () => {
        const text = await (await fetch(`${own.url}/metrics`)).text();
        return Number(/^kilolock_event_subscribers\{transport="sse"\} (\d+)$/m.exec(text)?.[1]);
      };
      for (let i = 0; i < 100 && (await subscribers()) !== 0; i++) {
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(await subscribers()).toBe(0);
      // One caller may still hold its 8, and a new subscriber gets what is written.
      const aborts = Array.from({ length: 8 }, () => new AbortController());
      const eight = await Promise.all(aborts.map((a) => sse('after', 'end', a.signal)));
      expect(eight.map((r) => r.status)).toEqual(Array(8).fill(200));
      const stream = eight[0].body!.getReader();
      const posted = await fetch(`${own.url}/v1/states/team-c/after`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify(doc(1, 1)),
      });
      expect(posted.status).toBe(200);
      let text = '';
      for (let i = 0; i < 50 && !text.includes('state-team-c/after'); i++) {
        const { value, done } = await stream.read();
        if (done) break;
        text += Buffer.from(value).toString();
      }
      expect(text).toContain('"stream":"state-team-c/after"');
      for (const a of aborts) a.abort();
    } finally {
      await own.stop();
    }
  });

  describe('seeded random requests against the routes no earlier fuzz reached', () => {
    // http-fuzz.e2e-spec.ts covers terraform's routes, imports, provider configs and queries.
    const SEED = fuzzSeed(Math.floor(Math.random() * 2 ** 31));
    const REQUESTS = Number(process.env.KL_FUZZ_REQUESTS ?? 300);

    const random = seededRandom(SEED);
    const { int, pick } = random;

    const TEXTS = [
      '',
      'a\u0000b',
      'x\ud800y',
      '😀 ü \u202e',
      '-1',
      '0',
      '1e400',
      '18446744073709551616',
      '2147483648',
      'k'.repeat(10 * 1024),
      '*',
      '**/***/*?',
      'module.m["k"].terraform_data.x[0]',
      'terraform_data.x[0]',
      'team-a/app',
      'team-a/%2e%2e',
      'true',
      'null',
    ];
    const { text, segment, mutated } = fuzzInputs(random, TEXTS, [
      'write',
      'read',
      'failed',
      'succeeded',
      'cancelled',
      'aborted',
      'drifted',
    ]);
    const QUERY_KEYS = [
      'state',
      'limit',
      'offset',
      'from',
      'to',
      'from_version',
      'to_version',
      'version',
      'glob',
      'type',
      'module',
      'provider',
      'sort',
      'order',
      'facets',
      'history',
      'address',
      'source',
      'address_glob',
      'creates',
      'deletes',
      'soft_resources',
      'max_resources',
      'limit[]',
      'x',
    ];
    function query(): string {
      const q = new URLSearchParams();
      for (let i = int(4); i > 0; i--) q.append(pick(QUERY_KEYS), text());
      return q.toString();
    }
    const GETS = [
      '/v1/api/states',
      '/v1/api/locks',
      '/v1/api/reservations',
      '/v1/api/apply-runs',
      '/v1/refresh-runs',
      '/v1/drift',
      '/v1/dashboard/states',
      '/v1/dashboard/changes',
      '/v1/dashboard/resources',
      '/v1/dashboard/resource-facets',
      '/v1/dashboard/dependencies',
      '/v1/dashboard/drift',
      `/v1/api/states/${state}/history`,
      `/v1/api/states/${state}/resources`,
      `/v1/api/states/${state}/diff`,
      `/v1/api/states/${state}/reservations`,
      '/v1/quotas',
      '/v1/quotas/rules',
      '/v1/quotas/check',
      '/v1/provider-schemas',
      `/v1/engine/states/${state}`,
      '/v1/provider-configs/history',
    ];

    interface Request_ {
      token: string;
      method: string;
      path: string;
      body?: unknown;
    }
    function request(runs: { refresh: string; apply: string }): Request_ {
      const fuzzState = pick(['team-a/fuzz', 'team-a/app', `team-a/${segment(text())}`]);
      switch (int(9)) {
        case 0:
        case 1:
          return { token: reader, method: 'GET', path: `${pick(GETS)}?${query()}` };
        case 2:
          return {
            token: reader,
            method: 'POST',
            path: `/v1/engine/states/${state}/${pick(['scope', 'slice'])}`,
            body: mutated({
              addresses: ['terraform_data.x[0]'],
              module_prefixes: [],
              selectors: [{ type: 'terraform_data' }],
              slice: true,
              version: 1,
            }),
          };
        case 3:
          return {
            token: writer,
            method: 'POST',
            path: `/v1/engine/states/${fuzzState}/runs`,
            body: mutated({
              operation: 'state rm',
              base_version: 1,
              write: ['terraform_data.x[1]'],
              read: [],
              info: {},
              lease_seconds: 30,
            }),
          };
        case 4:
          return {
            token: writer,
            method: 'POST',
            path: `/v1/api/states/${fuzzState}/apply-runs/${pick([runs.apply, segment(text())])}/${pick(['heartbeat', 'finish', 'abort', 'commit'])}`,
            body: mutated({ status: 'failed', error_summary: 'e', lease_seconds: 30 }),
          };
        case 5:
          return {
            token: writer,
            method: 'POST',
            path: '/v1/refresh-runs',
            body: mutated({ state: fuzzState, dry_run: true, actor: 'fuzz' }),
          };
        case 6:
          return {
            token: writer,
            method: 'POST',
            path: `/v1/refresh-runs/${pick([runs.refresh, segment(text())])}/results`,
            body: mutated({
              results: [
                mutated({
                  address: 'terraform_data.x[0]',
                  provider: PROVIDER,
                  outcome: 'drifted',
                  before_hash: 'b',
                  after_hash: 'c',
                  changed_paths: ['id'],
                }),
              ],
            }),
          };
        case 7:
          return {
            token: writer,
            method: 'PUT',
            path: '/v1/provider-schemas',
            body: mutated({
              source: 'registry.terraform.io/acme/cloud',
              version: '1.0.0',
              schema: {
                protocolVersion: 5,
                provider: {},
                resourceSchemas: {},
                dataSourceSchemas: {},
              },
            }),
          };
        default:
          return {
            token: admin,
            method: 'POST',
            path: '/v1/admin/tokens',
            body: mutated({ name: `fuzz-${int(1_000_000)}`, scopes: ['read:team-a/*'] }),
          };
      }
    }

    it(`answers ${REQUESTS} of them with 2xx or 4xx and a JSON error (seed ${SEED}, KL_FUZZ_SEED replays it)`, async () => {
      const refresh = await call(writer, 'POST', '/v1/refresh-runs', { state, dry_run: true });
      const apply = await call(writer, 'POST', `/v1/engine/states/${state}/runs`, {
        operation: 'fuzz',
        base_version: 1,
        write: ['terraform_data.x[19]'],
      });
      const runs = { refresh: refresh.body.run_id as string, apply: apply.body.run_id as string };
      const mark = kld.output().length;
      const failures: string[] = [];
      for (let i = 0; i < REQUESTS; i++) {
        const r = request(runs);
        const answer = await fetch(`${kld.url}${r.path}`, {
          method: r.method,
          headers: { Authorization: `Bearer ${r.token}`, 'Content-Type': 'application/json' },
          body: r.body === undefined ? undefined : JSON.stringify(r.body),
        }).catch((err: Error) => ({ status: 0, text: async () => err.message }));
        const body = await answer.text();
        const { refusedClearly } = fuzzAnswer(answer.status, body);
        if (!(answer.status >= 200 && answer.status < 300) && !refusedClearly) {
          failures.push(
            `${r.method} ${r.path.slice(0, 200)} -> ${answer.status} ${body.slice(0, 200)}`,
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
      await unchanged();
    });
  });
});
