import * as fs from 'node:fs';
import * as http from 'node:http';
import { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { gzipSync } from 'node:zlib';
import { ChildRunner, Run } from '../support/child-runner';
import { KL } from '../support/kld-process';

/**
 * The built `kl` against a server that is not a well-behaved kld: a hostile
 * one, a broken proxy, another user's strings. kl must show one readable
 * line or spelled-out text, never raw control characters, never a stack.
 */

jest.setTimeout(60_000);

// Clipboard write (OSC 52), clear screen, window title, CR overwrite, bidi
// override, backspace, 8-bit CSI.
const HOSTILE = '\x1b]52;c;ZXZpbA==\x07\x1b[2J\x1b]0;pwned\x07\rOK\u202egnp.exe\b\x9b31m';
const SPELLED =
  '\\x1b]52;c;ZXZpbA==\\x07\\x1b[2J\\x1b]0;pwned\\x07\\rOK\\u202egnp.exe\\x08\\x9b31m';
// eslint-disable-next-line no-control-regex
const RAW_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

type Answer = (req: http.IncomingMessage, res: http.ServerResponse) => void;

interface Stub {
  url: string;
  requests: { method: string; url: string; headers: http.IncomingHttpHeaders }[];
  answer: Answer;
  server: http.Server;
}

async function stub(): Promise<Stub> {
  const s = {
    requests: [],
    answer: (_req: http.IncomingMessage, res: http.ServerResponse) => res.end(),
  } as unknown as Stub;
  s.server = http.createServer((req, res) => {
    s.requests.push({ method: req.method!, url: req.url!, headers: req.headers });
    s.answer(req, res);
  });
  await new Promise<void>((resolve) => s.server.listen(0, '127.0.0.1', resolve));
  s.url = `http://127.0.0.1:${(s.server.address() as AddressInfo).port}`;
  return s;
}

async function stop(s: Stub): Promise<void> {
  s.server.closeAllConnections();
  await new Promise((resolve) => s.server.close(resolve));
}

const json =
  (status: number, body: unknown, headers: http.OutgoingHttpHeaders = {}): Answer =>
  (_req, res) =>
    res
      .writeHead(status, { 'content-type': 'application/json', ...headers })
      .end(typeof body === 'string' ? body : JSON.stringify(body));

let server: Stub;
let elsewhere: Stub;
let dir: string;
const runner = new ChildRunner(() => ({
  cwd: dir,
  env: {
    ...process.env,
    KL_SERVER_URL: server.url,
    KL_TOKEN: 'kl_secret_token_1234',
    KL_ACTOR: 'hostile-tester',
  },
}));

const kl = (args: string[], env: NodeJS.ProcessEnv = {}): Promise<Run> =>
  runner.run(process.execPath, [KL, ...args], { env });

/** Exit `code` and exactly one line on stderr, with no control character and no stack. */
function oneLine(r: Run, code: number, message: RegExp): string {
  expect({ code: r.code, stdout: r.stdout }).toEqual({ code, stdout: '' });
  const lines = r.stderr.trimEnd().split('\n');
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(/^kl: /);
  expect(lines[0]).toMatch(message);
  expect(lines[0]).not.toMatch(RAW_CONTROL);
  return lines[0];
}

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-hostile-'));
  server = await stub();
  elsewhere = await stub();
});

afterAll(async () => {
  runner.killAll();
  await stop(server);
  await stop(elsewhere);
  fs.rmSync(dir, { recursive: true, force: true });
});

beforeEach(() => {
  server.requests.length = 0;
  elsewhere.requests.length = 0;
});

const STATE_ROW = {
  stateId: 's1',
  name: `team/${HOSTILE}`,
  createdAt: '2026-01-01T00:00:00Z',
  updatedAt: '2026-01-01T00:00:00Z',
  version: 1,
  serial: 1,
  lineage: 'l',
  terraformVersion: '1.11.4',
  instanceCount: 0,
  resourceCount: 0,
  lock: { id: 'lock-1', who: HOSTILE, operation: 'OperationTypeApply', since: 'now' },
  quotaOverrun: null,
};

describe('strings from kld reach the terminal spelled out', () => {
  it("a refusal's message and a lock holder's Who: one line, escapes spelled out", async () => {
    server.answer = json(409, { error: { code: 'STATE.LOCKED', message: `held by ${HOSTILE}` } });
    expect(oneLine(await kl(['states']), 1, /^kl: held by /)).toBe(`kl: held by ${SPELLED}`);
    server.answer = json(423, { ID: 'lock-1', Who: HOSTILE });
    expect(oneLine(await kl(['states']), 1, /^kl: locked by /)).toBe(
      `kl: locked by ${SPELLED} (lock lock-1)`,
    );
    server.answer = (_req, res) =>
      res.writeHead(502, { 'content-type': 'text/html' }).end(`<html>${HOSTILE}</html>`);
    oneLine(await kl(['states']), 1, /^kl: kld answered 502 Bad Gateway: <html>\\x1b/);
  });

  it('a refusal of a megabyte on one line is cut, saying how much was left out', async () => {
    server.answer = json(400, {
      error: { code: 'REQUEST.INVALID', message: `bad ${'x'.repeat(1_000_000)}` },
    });
    const line = oneLine(await kl(['states']), 1, /^kl: bad x+… \(983620 more characters\)$/);
    expect(line.length).toBeLessThan(20_000);
  });

  it('a table spells out names and holders; json keeps the values exactly; csv to a pipe too', async () => {
    server.answer = json(200, { states: [STATE_ROW] });
    const table = await kl(['states']);
    expect({ code: table.code, stderr: table.stderr }).toEqual({ code: 0, stderr: '' });
    expect(table.stdout).not.toMatch(RAW_CONTROL);
    expect(table.stdout).toContain(`team/${SPELLED}`);

    const asJson = await kl(['states', '--format', 'json']);
    expect(asJson.stdout).not.toMatch(RAW_CONTROL);
    expect(JSON.parse(asJson.stdout)).toMatchObject([
      { name: `team/${HOSTILE}`, locked_by: HOSTILE },
    ]);

    // Data for a file or a program: exact (a terminal would see it spelled out).
    const csv = await kl(['states', '--format', 'csv']);
    expect(csv.stdout.split('\r\n')[1]).toMatch(new RegExp(`^"team/${escapeRe(HOSTILE)}",1,`));
  });

  it("history: another user's actor name in the table and the deleted-at note", async () => {
    server.answer = json(200, {
      deletedAt: HOSTILE,
      versions: [{ version: 1, serial: 1, lineage: 'l', source: 'http', actor: HOSTILE }],
    });
    const r = await kl(['history', 'team/a']);
    expect(r.code).toBe(0);
    expect(r.stdout).not.toMatch(RAW_CONTROL);
    expect(r.stdout).toContain(SPELLED);
    expect(r.stderr).toBe(`kl: state "team/a" was deleted at ${SPELLED}\n`);
  });

  it('events: a line per event spelled out; NDJSON escaped and still the same JSON', async () => {
    const event = {
      position: '1',
      occurredAt: 'now',
      actor: HOSTILE,
      stream: 's',
      revision: 0,
      type: 'X',
    };
    server.answer = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      // As kld writes it: JSON.stringify escapes ESC and CR, leaves C1 and bidi raw.
      res.end(`data: ${JSON.stringify(event)}\n\n`);
    };
    const lines = await kl(['events']);
    expect(lines.stdout).not.toMatch(RAW_CONTROL);
    expect(lines.stdout).toContain(`1  now  ${'\\x1b'}`);
    const ndjson = await kl(['events', '--format', 'json']);
    expect({ code: ndjson.code, stderr: ndjson.stderr }).toEqual({ code: 0, stderr: '' });
    expect(ndjson.stdout).not.toMatch(RAW_CONTROL);
    expect(ndjson.stdout).toContain('\\u202e');
  });

  it('an event that is not a JSON object, and an error event, are one line', async () => {
    server.answer = (_req, res) =>
      res.writeHead(200, { 'content-type': 'text/event-stream' }).end(`data: [1,${HOSTILE}\n\n`);
    oneLine(await kl(['events']), 1, /^kl: kld sent an event that is not a JSON object: \[1,\\x1b/);
    server.answer = (_req, res) =>
      res
        .writeHead(200, { 'content-type': 'text/event-stream' })
        .end(`event: error\ndata: ${JSON.stringify({ code: 'EVENTS.X', message: HOSTILE })}\n\n`);
    oneLine(await kl(['events']), 1, /^kl: EVENTS\.X: \\x1b/);
  });
});

describe('on a terminal', () => {
  /** kl with its stdout on a pseudo-terminal (util-linux `script`); what the terminal received. */
  async function onTerminal(args: string[]): Promise<string> {
    const command = [process.execPath, KL, ...args].map((a) => `'${a}'`).join(' ');
    const r = await runner.run('script', ['-qec', command, '/dev/null']);
    expect(r.code).toBe(0);
    // The terminal turns each \n into \r\n.
    return r.stdout.replace(/\r+\n/g, '\n');
  }

  it('csv and kl export spell out or escape what a pipe gets exactly', async () => {
    server.answer = json(200, { states: [STATE_ROW] });
    const csv = await onTerminal(['states', '--format', 'csv']);
    expect(csv).not.toMatch(RAW_CONTROL);
    expect(csv).toContain(`team/${SPELLED}`);

    const document = { version: 4, serial: 1, lineage: 'l', outputs: { x: { value: HOSTILE } } };
    server.answer = json(200, document, { 'x-kilolock-state-version': '1' });
    const shown = await onTerminal(['export', 'team/a']);
    expect(shown).not.toMatch(RAW_CONTROL);
    expect(JSON.parse(shown)).toEqual(document);
    const piped = await kl(['export', 'team/a']);
    expect(piped.stdout).toBe(JSON.stringify(document));
  });

  it('kl archive export escapes its NDJSON on a terminal, and not into a file', async () => {
    const line = JSON.stringify({ type: 'X', data: { who: HOSTILE } });
    server.answer = (_req, res) =>
      res.writeHead(200, { 'content-type': 'application/x-ndjson' }).end(`${line}\n${line}\n`);
    const shown = await onTerminal(['archive', 'export', 'team/a']);
    expect(shown).not.toMatch(RAW_CONTROL);
    expect(
      shown
        .trimEnd()
        .split('\n')
        .map((l) => JSON.parse(l) as unknown),
    ).toEqual([JSON.parse(line), JSON.parse(line)]);
    const file = path.join(dir, 'a.kla');
    expect((await kl(['archive', 'export', 'team/a', '-o', file])).code).toBe(0);
    expect(fs.readFileSync(file, 'utf8')).toBe(`${line}\n${line}\n`);
  });
});

describe('answers that are not what kl asked for', () => {
  const cases: [string, Answer, RegExp][] = [
    ['a list that is null', json(200, { states: null }), /has no list of objects "states"/],
    ['an array instead of an object', json(200, [1, 2]), /has no list of objects "states"/],
    ['rows that are not objects', json(200, { states: [1, 'x'] }), /has no list of objects/],
    ['a proxy page with 200', (_q, s) => s.writeHead(200).end('<html>hi'), /is not JSON/],
    [
      'a gzip body kl never asked for',
      (_q, s) => s.writeHead(200, { 'content-encoding': 'gzip' }).end(gzipSync('{"states":[]}')),
      /is not JSON \(content-encoding gzip; /,
    ],
    [
      'a body shorter than its content-length',
      (_q, s) => {
        s.writeHead(200, { 'content-length': '1000' }).write('{"states":[');
        setTimeout(() => s.socket?.destroy(), 50);
      },
      /^kl: the answer from kld at http:\/\/127\.0\.0\.1:\d+ broke off/,
    ],
    [
      'more than kl can hold, announced',
      (_q, s) => s.writeHead(200, { 'content-length': String(2 ** 31) }).write('{'),
      /is larger than \d+ bytes$/,
    ],
  ];
  it.each(cases)('%s: one line, exit 1', async (_what, answer, message) => {
    server.answer = answer;
    oneLine(await kl(['states']), 1, message);
  });

  it('history, a query and runs of another shape are one line, not a TypeError', async () => {
    server.answer = json(200, { deletedAt: null });
    oneLine(await kl(['history', 'a']), 1, /has no list of objects "versions"/);
    for (const body of [{ columns: null, rows: null }, null]) {
      server.answer = json(200, JSON.stringify(body));
      oneLine(await kl(['query', 'SELECT 1']), 1, /^kl: kld's answer to \/v1\/query has no rows$/);
    }
    server.answer = json(200, { columns: [{ name: 'a' }], rows: [[1]], truncated: false });
    expect((await kl(['query', 'SELECT 1', '--format', 'csv'])).stdout).toBe('a\r\n1\r\n');
    server.answer = json(200, { runs: [{ run_id: 'r', write: null }] });
    oneLine(await kl(['runs']), 1, /GET \/v1\/api\/apply-runs: runs\[0\]\.write is not an object/);
    const globs = { count: 1, first: ['a'] };
    server.answer = json(200, { runs: [{ run_id: 'r', write: globs, read: { count: 1 } }] });
    oneLine(await kl(['runs']), 1, /runs\[0\]\.read\.first is not a list of strings/);
  });

  const document = { version: 4, terraform_version: '1.11.4', serial: 1, lineage: 'l' };
  const fieldCases: [string[], unknown, string][] = [
    [
      ['token', 'list'],
      { tokens: [{ name: 't', scopes: 'admin' }] },
      'GET /v1/admin/tokens: tokens[0].scopes is not a list of strings',
    ],
    [
      ['resource', 'a', 'b', '--history'],
      { current: null, history: [{ attributesHash: 7 }] },
      'GET /v1/api/states/a/resources/b: history[0].attributesHash is not a string',
    ],
    [
      ['resource', 'a', 'b'],
      { current: 'aws_instance.b' },
      'GET /v1/api/states/a/resources/b: current is not an object or null',
    ],
    [
      ['query', 'SELECT 1'],
      { columns: [{ type: 'int' }], rows: [[1]] },
      'POST /v1/query: columns[0].name is not a string',
    ],
    [['drift', 'a'], { drift: { a: 1 } }, 'GET /v1/drift: drift is not a list or null'],
    [
      ['show', 'a'],
      { ...document, outputs: [], resources: [] },
      'GET /v1/states/a is not a state document (outputs must be an object)',
    ],
  ];
  it.each(fieldCases)(
    'kl %j with a field of another type: one line naming the request and the field',
    async (args, body, message) => {
      server.answer = json(200, body, { 'x-kilolock-state-version': '1' });
      const line = oneLine(await kl(args), 1, /^kl: kld's answer to /);
      expect(line).toContain(message);
    },
  );
});

describe('a server that never finishes', () => {
  const bounds = { KL_IDLE_TIMEOUT: '1', KL_REQUEST_TIMEOUT: '2' };

  it('accepting and never answering: one line naming the request and the idle bound, exit 1', async () => {
    server.answer = () => {};
    oneLine(
      await kl(['states', '--idle-timeout', '1s']),
      1,
      /^kl: GET \/v1\/api\/states: nothing from kld at http:\/\/127\.0\.0\.1:\d+ for 1 s \(the bound: --idle-timeout or KL_IDLE_TIMEOUT\)$/,
    );
  });

  it('a byte now and then, never the end: one line naming the request and the overall bound', async () => {
    server.answer = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }).write('{"states":[');
      const timer = setInterval(() => res.write(' '), 300);
      res.on('close', () => clearInterval(timer));
    };
    oneLine(
      await kl(['states'], bounds),
      1,
      /^kl: GET \/v1\/api\/states: kld at http:\/\/127\.0\.0\.1:\d+ did not finish answering within 2 s \(the bound: --request-timeout or KL_REQUEST_TIMEOUT\)$/,
    );
  });

  it('a bound that is not a duration is a usage error', async () => {
    const r = await kl(['states'], { KL_REQUEST_TIMEOUT: 'soon' });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      "kl: option '--request-timeout <duration>' value 'soon' from env 'KL_REQUEST_TIMEOUT' is invalid. expected a duration such as 90s, 15m or 1h (0 for none)\n",
    );
    expect(server.requests).toEqual([]);
  });

  it('kl events --follow outlives both bounds while heartbeats and events come; without --follow the stream has an end to reach', async () => {
    const event = {
      position: '7',
      occurredAt: 'now',
      actor: 'a',
      stream: 's',
      revision: 0,
      type: 'X',
    };
    const stream: Answer = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      // Keep-alives as kld sends them, an event after the overall bound, the end after 3 s.
      const heartbeat = setInterval(() => res.write(': heartbeat\n\n'), 300);
      const later = setTimeout(() => res.write(`data: ${JSON.stringify(event)}\n\n`), 2_500);
      const end = setTimeout(() => res.end(), 3_000);
      res.on('close', () => [heartbeat, later, end].forEach(clearTimeout));
    };
    server.answer = stream;
    const followed = await kl(['events', '--follow'], bounds);
    expect({ code: followed.code, stderr: followed.stderr }).toEqual({ code: 0, stderr: '' });
    expect(followed.stdout).toContain('7  now  a  s  0  X');
    // kld is asked for keep-alives within the idle bound: here every second (its least).
    const askedHeartbeat = () =>
      new URL(server.requests.pop()!.url, server.url).searchParams.get('heartbeat');
    expect(askedHeartbeat()).toBe('1');
    server.answer = (_req, res) =>
      res.writeHead(200, { 'content-type': 'text/event-stream' }).end();
    expect((await kl(['events', '--idle-timeout', '30s'])).code).toBe(0);
    expect(askedHeartbeat()).toBe('10');
    expect((await kl(['events'])).code).toBe(0);
    expect(askedHeartbeat()).toBeNull();
    server.answer = stream;
    oneLine(
      await kl(['events'], bounds),
      1,
      /^kl: GET \/v1\/events: kld at .* did not finish answering within 2 s \(the bound: --request-timeout/,
    );
  });

  it('an error answer without end: kl reads 1 MiB of it and says it was cut', async () => {
    let sent = 0;
    server.answer = (_req, res) => {
      res.writeHead(500, { 'content-type': 'text/html' }).write('<html>Internal error\n');
      const chunk = Buffer.alloc(64 * 1024, 0x41);
      const more = () => {
        // Endless unless kl stops reading: bounded here at 256 MiB.
        while (sent < 256 * 1024 * 1024 && !res.destroyed) {
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', more);
        }
        res.end();
      };
      more();
    };
    oneLine(
      await kl(['states']),
      1,
      /^kl: kld answered 500 Internal Server Error \(an error answer of more than 1048576 bytes, cut there\): <html>Internal error$/,
    );
    expect(sent).toBeLessThan(32 * 1024 * 1024);
  });
});

describe('a kld that asks kl to come back later (429 with Retry-After)', () => {
  const tooMany = (after: string): Answer =>
    json(
      429,
      { error: { code: 'REQUEST.TOO_MANY', message: 'too many requests from hostile-tester' } },
      { 'retry-after': after },
    );

  /** Answers `first` to the first `n` requests, then `then`. */
  function refusing(n: number, first: Answer, then: Answer): Answer {
    let seen = 0;
    return (req, res) => (seen++ < n ? first : then)(req, res);
  }

  it('a read waits as told, one stderr line, then goes on', async () => {
    server.answer = refusing(1, tooMany('1'), json(200, { states: [] }));
    const r = await kl(['states', '--format', 'json']);
    expect(r).toMatchObject({
      code: 0,
      stdout: '[]\n',
      stderr:
        'kl: kld answered 429 (too many requests) to GET /v1/api/states; trying again in 1 s (1 of 3)\n',
    });
    expect(server.requests).toHaveLength(2);
  });

  it('after 3 retries, or when asked to wait longer than 60 s, the refusal in one line', async () => {
    server.answer = tooMany('0');
    const r = await kl(['states']);
    expect(server.requests).toHaveLength(4);
    expect(r.code).toBe(1);
    expect(r.stderr.trimEnd().split('\n')).toEqual([
      ...[1, 2, 3].map(
        (n) =>
          `kl: kld answered 429 (too many requests) to GET /v1/api/states; trying again in 0 s (${n} of 3)`,
      ),
      'kl: too many requests from hostile-tester',
    ]);
    server.requests.length = 0;
    server.answer = tooMany('3600');
    oneLine(await kl(['states']), 1, /^kl: too many requests from hostile-tester$/);
    expect(server.requests).toHaveLength(1);
  });

  it('a write kld does not document as safe to repeat is sent once', async () => {
    server.answer = refusing(1, tooMany('0'), json(201, { name: 'x', scopes: ['query'] }));
    oneLine(
      await kl(['token', 'create', '--name', 'x', '--scope', 'query']),
      1,
      /^kl: too many requests from hostile-tester$/,
    );
    expect(server.requests.map((q) => q.method)).toEqual(['POST']);
  });
});

describe('a state without the version kld names in its header', () => {
  it('kl show refuses it in one line; kl export, which does not print it, writes the document', async () => {
    const document = {
      version: 4,
      terraform_version: '1.11.4',
      serial: 1,
      lineage: 'l',
      outputs: {},
      resources: [],
    };
    server.answer = json(200, document, { 'x-kilolock-state-version': '1e3' });
    oneLine(
      await kl(['show', 'a']),
      1,
      /^kl: kld's answer to GET \/v1\/states\/a has no version in X-Kilolock-State-Version /,
    );
    expect((await kl(['export', 'a'])).stdout).toBe(JSON.stringify(document));
  });
});

describe('a quota verdict of another shape', () => {
  it('is one line naming the field, not a TypeError', async () => {
    fs.writeFileSync(path.join(dir, 'plan.json'), '{"format_version":"1.2","resource_changes":[]}');
    server.answer = json(200, { over: null, message: { text: 'fits' } });
    oneLine(
      await kl(['quota', 'check', '--tf-plan', 'plan.json', '--state', 'a']),
      1,
      /^kl: quota check failed: kld's answer to GET \/v1\/quotas\/check: message is not a string /,
    );
  });
});

describe('the token stays with the server it was given for', () => {
  it.each([301, 302, 307, 308])(
    'a %i to another server is not followed: nothing reaches it',
    async (status) => {
      server.answer = (_req, res) =>
        res.writeHead(status, { location: `${elsewhere.url}/v1/api/states` }).end('moved');
      const line = oneLine(await kl(['states']), 1, new RegExp(`^kl: kld answered ${status} `));
      expect(line).toContain(
        `(to ${elsewhere.url}/v1/api/states; kl does not follow redirects: give that URL as --server)`,
      );
      expect(server.requests).toHaveLength(1);
      expect(server.requests[0].headers.authorization).toBe('Bearer kl_secret_token_1234');
      expect(elsewhere.requests).toEqual([]);
    },
  );

  it('the token over plain http to another host: one warning line on stderr, then the request', async () => {
    // .invalid never resolves: the warning comes before the connection is tried.
    const r = await kl(['states'], { KL_SERVER_URL: 'http://kld.invalid:8080' });
    expect(r.code).toBe(1);
    expect(r.stderr.trimEnd().split('\n')).toEqual([
      'kl: warning: the token goes to http://kld.invalid:8080 unencrypted (http, not https): anyone on the network between can read and reuse it',
      expect.stringMatching(/^kl: cannot reach kld at http:\/\/kld\.invalid:8080 /),
    ]);
    server.answer = json(200, { states: [] });
    expect((await kl(['states'])).stderr).toBe('');
  });

  it('kl config masks a password in the state URL and spells out a state name', async () => {
    const r = await kl(['config'], {
      KL_STATE_URL: `http://ops:S3cret@127.0.0.1:1/v1/states/a%1b%5d0%3bpwned%07`,
    });
    expect(r.code).toBe(0);
    expect(r.stdout).not.toContain('S3cret');
    expect(r.stdout).toContain('http://ops:***@127.0.0.1:1/v1/states/');
    expect(r.stdout).not.toMatch(RAW_CONTROL);
    expect(r.stdout).toMatch(/^state +a\\x1b\]0;pwned\\x07 /m);
    expect(r.stdout).not.toContain('kl_secret_token_1234');
  });
});

function escapeRe(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
