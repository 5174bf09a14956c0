import { createHash } from 'node:crypto';
import * as http from 'node:http';
import { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { DomainError } from '../../domain/shared/domain-error';
import { bigNumberText } from '../../domain/terraform/lossless-json';
import { errorOf, KldHttpClient, MAX_ANSWER_BYTES, retryAfterMs } from './kld-http-client';

/** A kld stand-in on 127.0.0.1 answering with `handler`; what it received is kept. */
async function withServer(
  handler: http.RequestListener,
  test: (url: string) => Promise<void>,
): Promise<void> {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    await test(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

async function bodyOf(req: http.IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

describe('KldHttpClient', () => {
  it('names the server it cannot reach without the password in its URL', async () => {
    const client = new KldHttpClient('http://ops:S3cret@127.0.0.1:1');
    const error = await client.send('GET', '/v1/api/states').then(
      () => null,
      (e: Error) => e,
    );
    expect(error).toBeInstanceOf(DomainError);
    expect(error?.message).toMatch(
      /^cannot reach kld at http:\/\/ops:\*\*\*@127\.0\.0\.1:1 \(ECONNREFUSED\); set --server or KL_SERVER_URL$/,
    );
    expect(error?.message).not.toContain('S3cret');
  });

  it('sends the token as a Bearer token, credentials in the URL as Basic, the actor, the query', async () => {
    const seen: http.IncomingHttpHeaders[] = [];
    const urls: string[] = [];
    await withServer(
      (req, res) => {
        seen.push(req.headers);
        urls.push(req.url!);
        res
          .writeHead(200, { 'content-type': 'application/json' })
          .end('{"n":12345678901234567890}');
      },
      async (url) => {
        const withToken = new KldHttpClient(url, { token: 't0k', actor: 'me@host' });
        const answer = await withToken.json<{ n: string }>('GET', '/v1/x', {
          query: { a: 'b c', skip: undefined, none: null, n: 2 },
        });
        // Numbers beyond double precision stay exact.
        expect(bigNumberText(answer.n)).toBe('12345678901234567890');
        const basic = new KldHttpClient(url.replace('//', '//ops:p%40ss@'), { actor: 'me@host' });
        await basic.json('GET', '/v1/y');
      },
    );
    expect(urls).toEqual(['/v1/x?a=b+c&n=2', '/v1/y']);
    expect(seen[0].authorization).toBe('Bearer t0k');
    expect(seen[0]['x-kilolock-actor']).toBe('me@host');
    expect(seen[1].authorization).toBe(`Basic ${Buffer.from('ops:p@ss').toString('base64')}`);
  });

  it('carries a 24 MB body each way, whole, as a buffer and as a stream of chunks', async () => {
    const big = Buffer.alloc(24 * 2 ** 20, 'x');
    big.write('{"first":1}', 0);
    big.write('last', big.length - 4);
    const received: { length: number; sha: string; chunked: boolean }[] = [];
    await withServer(
      (req, res) => {
        void bodyOf(req).then((body) => {
          received.push({
            length: body.length,
            sha: sha(body),
            chunked: req.headers['transfer-encoding'] === 'chunked',
          });
          res.writeHead(200).end(req.method === 'GET' ? big : 'ok');
        });
      },
      async (url) => {
        const client = new KldHttpClient(url);
        await (await client.send('POST', '/up', { body: big })).buffer();
        async function* chunks() {
          for (let i = 0; i < big.length; i += 1 << 20) yield big.subarray(i, i + (1 << 20));
        }
        await (await client.send('POST', '/up', { body: chunks() })).buffer();
        const down = await client.send('GET', '/down');
        expect(sha(await down.buffer())).toBe(sha(big));
        // Read twice (an error body is), the same bytes.
        expect((await down.text()).length).toBe(big.length);
      },
    );
    expect(received.slice(0, 2)).toEqual([
      { length: big.length, sha: sha(big), chunked: false },
      { length: big.length, sha: sha(big), chunked: true },
    ]);
  });

  it("turns kld's JSON refusal into its code and message", async () => {
    await withServer(
      (_req, res) => {
        res.writeHead(423, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { code: 'STATE.LOCKED', message: 'state a is locked' } }));
      },
      async (url) => {
        const error = await new KldHttpClient(url).json('GET', '/v1/x').then(
          () => null,
          (e: DomainError) => e,
        );
        expect(error).toBeInstanceOf(DomainError);
        expect(error?.code).toBe('STATE.LOCKED');
        expect(error?.message).toBe('state a is locked');
      },
    );
  });

  it('says in one line when the answer breaks off', async () => {
    await withServer(
      (_req, res) => {
        res.writeHead(200, { 'content-length': '1000' });
        res.write('{"half":');
        setTimeout(() => res.socket?.destroy(), 20);
      },
      async (url) => {
        const error = await new KldHttpClient(url).json('GET', '/v1/x').then(
          () => null,
          (e: DomainError) => e,
        );
        expect(error?.code).toBe('SERVER.UNREACHABLE');
        expect(error?.message).toMatch(
          /^the answer from kld at http:\/\/127\.0\.0\.1:\d+ broke off/,
        );
        expect(error?.message).not.toContain('\n');
      },
    );
  });

  it('says in one line that an answer is not JSON: a proxy page with 200, a gzip body', async () => {
    const bodies = [
      { headers: { 'content-type': 'text/html' }, body: '<html>\n<p>Welcome</p>' },
      { headers: { 'content-encoding': 'gzip' }, body: gzipSync('{"states":[]}') },
    ];
    await withServer(
      (req, res) => {
        const b = bodies[Number(req.url!.slice(-1))];
        res.writeHead(200, b.headers).end(b.body);
      },
      async (url) => {
        const client = new KldHttpClient(url);
        const errors = await Promise.all(
          ['/v1/x?n=0', '/v1/x?n=1'].map((path) =>
            client.json('GET', path).then(
              () => null,
              (e: DomainError) => e,
            ),
          ),
        );
        expect(errors.map((e) => e?.code)).toEqual([
          'SERVER.UNEXPECTED_ANSWER',
          'SERVER.UNEXPECTED_ANSWER',
        ]);
        expect(errors[0]?.message).toMatch(/^kld's answer to GET \/v1\/x is not JSON \(/);
        expect(errors[1]?.message).toMatch(
          /^kld's answer to GET \/v1\/x is not JSON \(content-encoding gzip; /,
        );
        for (const e of errors) expect(e?.message).not.toContain('\n');
      },
    );
  });

  it('stops reading an answer larger than it can hold, announced or not', async () => {
    expect(MAX_ANSWER_BYTES).toBeGreaterThan(512 * 1024 * 1024 - 1024);
    let sent = 0;
    await withServer(
      (req, res) => {
        if (req.url === '/announced') {
          // Claims more than kl holds; kl must not start reading it.
          res.writeHead(200, { 'content-length': String(MAX_ANSWER_BYTES + 1) });
          res.write('[');
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        writeUntilStopped(res, 0x20, (n) => (sent += n));
      },
      async (url) => {
        const client = new KldHttpClient(url);
        const announced = await client.json('GET', '/announced').then(
          () => null,
          (e: DomainError) => e,
        );
        expect(announced?.code).toBe('SERVER.UNEXPECTED_ANSWER');
        expect(announced?.message).toMatch(/is larger than \d+ bytes$/);
        const res = await client.send('GET', '/streamed');
        const streamed = await res.buffer(1024 * 1024).then(
          () => null,
          (e: DomainError) => e,
        );
        expect(streamed?.message).toMatch(/is larger than 1048576 bytes$/);
        expect(sent).toBeLessThan(64 * 1024 * 1024);
      },
    );
  });

  it('gives up on a kld that goes silent, before its answer or inside it, and says so', async () => {
    await withServer(
      (req, res) => {
        // Never answers, or stops half-way: only kl's idle bound ends these.
        if (req.url === '/half') res.writeHead(200).write('{"states":[');
      },
      async (url) => {
        const client = new KldHttpClient(url, { idleTimeoutMs: 200 });
        const failure = (p: Promise<unknown>) =>
          p.then(
            () => null,
            (e: DomainError) => e,
          );
        const silent = await failure(client.json('GET', '/silent'));
        expect(silent?.code).toBe('SERVER.UNREACHABLE');
        expect(silent?.message).toBe(
          `GET /silent: nothing from kld at ${url} for 0.2 s (the bound: --idle-timeout or KL_IDLE_TIMEOUT)`,
        );
        const half = await failure(client.json('GET', '/half?x=1'));
        expect(half?.message).toBe(
          `GET /half: nothing from kld at ${url} for 0.2 s (the bound: --idle-timeout or KL_IDLE_TIMEOUT)`,
        );
      },
    );
  });

  it('gives up on a kld that sends a byte now and then, which the idle bound lets through', async () => {
    const timers: NodeJS.Timeout[] = [];
    await withServer(
      (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        // A byte every 50 ms of a body that never ends.
        timers.push(setInterval(() => res.write(' '), 50));
      },
      async (url) => {
        const client = new KldHttpClient(url, { idleTimeoutMs: 1_000, timeoutMs: 300 });
        const late = await client.json('GET', '/drip').then(
          () => null,
          (e: DomainError) => e,
        );
        expect(late?.code).toBe('SERVER.UNREACHABLE');
        expect(late?.message).toBe(
          `GET /drip: kld at ${url} did not finish answering within 0.3 s (the bound: --request-timeout or KL_REQUEST_TIMEOUT)`,
        );
        // A stream read for as long as it lasts keeps only the idle bound.
        const res = await client.send('GET', '/drip', { endless: true });
        let bytes = 0;
        for await (const chunk of res.body) {
          bytes += (chunk as Buffer).length;
          if (bytes >= 12) break; // 600 ms, twice the overall bound
        }
        expect(bytes).toBeGreaterThanOrEqual(12);
      },
    );
    for (const t of timers) clearInterval(t);
  });

  it("reads at most 1 MiB of an error answer, and says it was cut; a 409's list up to 64 MiB", async () => {
    let sent = 0;
    // What a 409 of a 20k-address plan carries: every holder, then the code and message.
    const holders = Array.from({ length: 20_000 }, (_, i) => ({
      kind: 'apply',
      glob: `module.app.aws_instance.web["${i}"]`,
      mode: 'write',
      actor: 'ci@runner-17',
      run_id: '0b7c1d4e-8f0a-4b1c-9d2e-3f4a5b6c7d8e',
      lock_id: '',
      acquired_at: '2026-12-02T13:00:00.000Z',
      expires_at: '2026-12-02T13:15:00.000Z',
    }));
    const conflict = JSON.stringify({
      error: { holders, code: 'RESERVATION.CONFLICT', message: 'state a: held by ci' },
    });
    await withServer(
      (req, res) => {
        if (req.url === '/conflict') {
          res.writeHead(409, { 'content-type': 'application/json' }).end(conflict);
          return;
        }
        res.writeHead(502, { 'content-type': 'text/html' });
        res.write('<html>Bad Gateway\n');
        writeUntilStopped(res, 0x41, (n) => (sent += n));
      },
      async (url) => {
        const client = new KldHttpClient(url);
        const page = await client.json('GET', '/v1/x').then(
          () => null,
          (e: DomainError) => e,
        );
        expect(page?.code).toBe('SERVER.UNEXPECTED_ANSWER');
        expect(page?.message).toBe(
          'kld answered 502 Bad Gateway (an error answer of more than 1048576 bytes, cut there): <html>Bad Gateway',
        );
        expect(sent).toBeLessThan(16 * 1024 * 1024);
        expect(conflict.length).toBeGreaterThan(4 * 1024 * 1024);
        const res = await client.send('POST', '/conflict');
        expect(
          ((await res.json()) as { error: { holders: unknown[] } }).error.holders,
        ).toHaveLength(20_000);
        const error = await errorOf(res);
        expect([error.code, error.message]).toEqual([
          'RESERVATION.CONFLICT',
          'state a: held by ci',
        ]);
      },
    );
  });

  it('stops reading a stream when its signal aborts', async () => {
    await withServer(
      (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(': hello\n\n');
        // Never ends: only the abort stops the reader.
      },
      async (url) => {
        const abort = new AbortController();
        const res = await new KldHttpClient(url).send('GET', '/v1/events', {
          signal: abort.signal,
        });
        const chunks: string[] = [];
        const reading = (async () => {
          try {
            for await (const c of res.body) {
              chunks.push(String(c));
              abort.abort();
            }
          } catch {
            return 'stopped';
          }
          return 'ended';
        })();
        expect(await reading).toBe('stopped');
        expect(chunks).toEqual([': hello\n\n']);
      },
    );
  });
});

describe('a kld that asks kl to come back (429, 503 with Retry-After)', () => {
  it('sends a request it may repeat again after the wait, at most 3 times, one stderr line each', async () => {
    const seen: string[] = [];
    const refusals: Record<string, [number, string | null][]> = {
      '/twice': [
        [429, '0'],
        [503, '0'],
      ],
      '/always': Array.from({ length: 10 }, (): [number, string | null] => [429, '0']),
      '/later': [[429, '3600']],
      '/unsaid': [[429, null]],
      '/broken': [[500, '0']],
      '/write': [
        [429, '0'],
        [429, '0'],
      ],
      '/stream': [[429, '0']],
      '/date': [[429, new Date(Date.now() - 60_000).toUTCString()]],
    };
    const written = jest.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      await withServer(
        (req, res) => {
          void bodyOf(req).then((body) => {
            seen.push(`${req.method} ${req.url} ${body.length}`);
            const next = refusals[req.url!.split('?')[0]]?.shift();
            if (next === undefined) return void res.writeHead(200).end('{"ok":true}');
            const [status, after] = next;
            res.writeHead(status, after === null ? {} : { 'retry-after': after });
            res.end(JSON.stringify({ error: { code: 'REQUEST.TOO_MANY', message: 'slow down' } }));
          });
        },
        async (url) => {
          const client = new KldHttpClient(url);
          const outcome = (p: Promise<unknown>) =>
            p.then(
              (v) => v,
              (e: DomainError) => e.message,
            );
          expect(await outcome(client.json('GET', '/twice?a=1'))).toEqual({ ok: true });
          expect(await outcome(client.json('GET', '/always'))).toBe('slow down');
          expect(await outcome(client.json('GET', '/later'))).toBe('slow down');
          expect(await outcome(client.json('GET', '/unsaid'))).toBe('slow down');
          expect(await outcome(client.json('GET', '/broken'))).toBe('slow down');
          expect(await outcome(client.json('GET', '/date'))).toEqual({ ok: true });
          // A write kld does not document as safe to repeat is not; one that it does, is.
          expect(await outcome(client.json('POST', '/write', { json: {} }))).toBe('slow down');
          expect(await outcome(client.json('POST', '/write', { json: {}, retry: true }))).toEqual({
            ok: true,
          });
          // A streamed body cannot be sent twice.
          async function* chunks() {
            yield Buffer.from('{}');
          }
          const streamed = client.json('POST', '/stream', { body: chunks(), retry: true });
          expect(await outcome(streamed)).toBe('slow down');
        },
      );
      const requests = (path: string) => seen.filter((r) => r.split(' ')[1].startsWith(path));
      expect(requests('/twice')).toEqual([
        'GET /twice?a=1 0',
        'GET /twice?a=1 0',
        'GET /twice?a=1 0',
      ]);
      expect(requests('/always')).toHaveLength(4);
      for (const once of ['/later', '/unsaid', '/broken', '/stream']) {
        expect(requests(once)).toHaveLength(1);
      }
      expect(requests('/date')).toHaveLength(2);
      expect(requests('/write')).toEqual(['POST /write 2', 'POST /write 2', 'POST /write 2']);
      expect(written.mock.calls.map((c) => String(c[0]))).toEqual([
        'kl: kld answered 429 (too many requests) to GET /twice; trying again in 0 s (1 of 3)\n',
        'kl: kld answered 503 (unavailable) to GET /twice; trying again in 0 s (2 of 3)\n',
        'kl: kld answered 429 (too many requests) to GET /always; trying again in 0 s (1 of 3)\n',
        'kl: kld answered 429 (too many requests) to GET /always; trying again in 0 s (2 of 3)\n',
        'kl: kld answered 429 (too many requests) to GET /always; trying again in 0 s (3 of 3)\n',
        'kl: kld answered 429 (too many requests) to GET /date; trying again in 0 s (1 of 3)\n',
        'kl: kld answered 429 (too many requests) to POST /write; trying again in 0 s (1 of 3)\n',
      ]);
    } finally {
      written.mockRestore();
    }
  });

  it('reads Retry-After as seconds or an HTTP date', () => {
    const now = Date.parse('2026-12-02T13:00:00Z');
    expect(retryAfterMs('120', now)).toBe(120_000);
    expect(retryAfterMs(' 0 ', now)).toBe(0);
    expect(retryAfterMs('Wed, 02 Dec 2026 13:00:30 GMT', now)).toBe(30_000);
    expect(retryAfterMs('Wed, 02 Dec 2026 12:00:00 GMT', now)).toBe(0);
    for (const no of [null, '', '-5', '1.5', 'soon', '12 parsecs', '99999999999']) {
      expect(retryAfterMs(no, now)).toBeNull();
    }
  });
});

describe('errorOf', () => {
  const answer = (status: number, body: string) => new Response(body, { status });

  it("keeps kld's code and the first line of its message", async () => {
    const body = { error: { code: 'STATE.LOCKED', message: 'state a is locked\nby bob' } };
    const error = await errorOf(answer(423, JSON.stringify(body)));
    expect(error).toBeInstanceOf(DomainError);
    expect(error.code).toBe('STATE.LOCKED');
    expect(error.message).toBe('state a is locked');
  });

  it('answers a code this kl does not know as SERVER.UNEXPECTED_ANSWER, with the message', async () => {
    const body = { error: { code: 'STATE.FROM_THE_FUTURE', message: 'a newer refusal' } };
    const error = await errorOf(answer(409, JSON.stringify(body)));
    expect(error.code).toBe('SERVER.UNEXPECTED_ANSWER');
    expect(error.message).toBe('a newer refusal');
    expect(error.metadata).toMatchObject({ status: 409, serverCode: 'STATE.FROM_THE_FUTURE' });
  });

  it("answers what is not kld's JSON (a proxy's page) as SERVER.UNEXPECTED_ANSWER", async () => {
    const page = new Response('<html>\n<h1>Bad Gateway</h1>', {
      status: 502,
      statusText: 'Bad Gateway',
    });
    const error = await errorOf(page);
    expect(error.code).toBe('SERVER.UNEXPECTED_ANSWER');
    expect(error.message).toBe('kld answered 502 Bad Gateway: <html>');
    // HTTP/2 has no reason phrase.
    expect((await errorOf(answer(502, ''))).message).toBe('kld answered 502');
  });
});

describe('credentials over plain http', () => {
  const unreachable = (client: KldHttpClient) =>
    client.send('GET', '/v1/api/states').catch((e: Error) => e.message);

  it('warn once per run on stderr for another host; never on loopback, https or without credentials', async () => {
    const written = jest.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      await unreachable(new KldHttpClient('http://127.0.0.1:1', { token: 't' }));
      await unreachable(new KldHttpClient('http://localhost:1', { token: 't' }));
      await unreachable(new KldHttpClient('http://[::1]:1', { token: 't' }));
      await unreachable(new KldHttpClient('https://kld.invalid:1', { token: 't' }));
      await unreachable(new KldHttpClient('http://kld.invalid:1'));
      expect(written).not.toHaveBeenCalled();
      await unreachable(new KldHttpClient('http://ops:S3cret@kld.invalid:1'));
      await unreachable(new KldHttpClient('http://kld.invalid:2', { token: 't' }));
      expect(written.mock.calls).toEqual([
        [
          'kl: warning: the password goes to http://kld.invalid:1 unencrypted (http, not https): anyone on the network between can read and reuse it\n',
        ],
      ]);
    } finally {
      written.mockRestore();
    }
  });
});

/**
 * Writes 16 KiB chunks of `byte` for as long as the client reads them
 * (endless unless kl stops reading: bounded here at 64 MiB), counting each
 * with `wrote`.
 */
function writeUntilStopped(
  res: http.ServerResponse,
  byte: number,
  wrote: (bytes: number) => number,
): void {
  const chunk = Buffer.alloc(16 * 1024, byte);
  let total = 0;
  const more = () => {
    while (total < 64 * 1024 * 1024) {
      total += chunk.length;
      wrote(chunk.length);
      if (!res.write(chunk)) return void res.once('drain', more);
    }
    res.end();
  };
  more();
}
