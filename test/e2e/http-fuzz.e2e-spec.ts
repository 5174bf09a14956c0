import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { KL, KldProcess, startKld } from '../support/kld-process';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { fuzzSeed, seededRandom } from '../support/seeded-random';

/**
 * Random requests against the write surface of a real kld: NUL characters,
 * lone surrogates, invalid UTF-8, numbers beyond any range, 10,000 levels
 * of nesting, 1 MB strings, wrong types, and terraform-shaped states mutated
 * at random places. Every answer must be 2xx or 4xx (4xx with a JSON error,
 * or the holder's LockInfo for a lock conflict), and afterwards the server
 * must be ready with every projector caught up, replay its whole log, and
 * serve terraform and kl as before. KL_FUZZ_SEED replays a run.
 */

jest.setTimeout(120_000);

const SEED = fuzzSeed(Math.floor(Math.random() * 2 ** 31));
const REQUESTS = Number(process.env.KL_FUZZ_REQUESTS ?? 400);
const CONCURRENCY = 4;
const TERRAFORM = process.env.KL_TEST_TERRAFORM ?? 'terraform';

let t: TestDatabase;
let kld: KldProcess;
let root: string;

beforeAll(async () => {
  t = await createTestDatabase('kl_fuzz');
  kld = await startKld({ KL_DATABASE_URL: t.url });
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-fuzz-'));
});

afterAll(async () => {
  await kld?.stop();
  await t?.drop();
  if (root) fs.rmSync(root, { recursive: true, force: true });
});

// --- a seeded PRNG and what it draws ---------------------------------------

const { chance, int, pick } = seededRandom(SEED);

// Raw JSON text spliced in where a value would go: JSON.stringify cannot write these.
const RAW = '\u0001raw:';
const raw = (text: string) => `${RAW}${text}`;
const rawJson = (value: unknown): string =>
  JSON.stringify(value).replace(/"\\u0001raw:((?:[^"\\]|\\.)*)"/g, (_m, text: string) =>
    JSON.parse(`"${text}"`),
  );

const NUMBERS = [
  '1e400',
  '-1e-400',
  '18446744073709551616',
  '123456789012345678901234567890.000000000000000001',
  '1e131071',
  '1e131072',
  '-1e-16383',
  '1e-16384',
  '-0',
  '0.1',
  '2147483648',
  '9007199254740993',
  '1E+308',
];
const DEEP = '['.repeat(10_000) + ']'.repeat(10_000);

function weirdString(): string {
  switch (int(10)) {
    case 0:
      return 'a\u0000b';
    case 1:
      return `x${pick(['\ud800', '\udfff', '\udbff\udbff', '\udc00\ud800'])}y`;
    case 2:
      return '😀 é \u2028 \t\n "quoted" \\u0000 literal';
    case 3:
      return String.fromCharCode(...Array.from({ length: 8 }, () => int(32)));
    case 4:
      return chance(0.1) ? 'x'.repeat(1024 * 1024) : 'y'.repeat(int(3000));
    case 5:
      return '';
    default:
      return `s${int(1000)}`;
  }
}

function randomValue(depth = 0): unknown {
  const kinds = depth > 4 ? 6 : 9;
  switch (int(kinds)) {
    case 0:
      return weirdString();
    case 1:
      return raw(pick(NUMBERS));
    case 2:
      return pick([null, true, false, 0, -1, 1.5]);
    case 3:
      return int(1_000_000);
    case 4:
      return weirdString();
    case 5:
      return chance(0.05) ? raw(DEEP) : `plain-${int(100)}`;
    case 6:
      return Array.from({ length: int(4) }, () => randomValue(depth + 1));
    default: {
      const o: Record<string, unknown> = {};
      for (let i = int(4); i > 0; i--)
        o[chance(0.2) ? weirdString() : `k${int(20)}`] = randomValue(depth + 1);
      return o;
    }
  }
}

const NAMES = ['fuzz/a', 'fuzz/b', 'fuzz/c', 'fuzz/d'];
const BAD_NAMES = [
  'fuzz/%00x',
  'fuzz/..',
  `fuzz/${'n'.repeat(600)}`,
  'fuzz/a/refresh',
  'fuzz/%ED%A0%80',
];
const LOCK_IDS = ['L1', 'L2', 'L3'];

function stateName(): string {
  return chance(0.1) ? pick(BAD_NAMES) : pick(NAMES);
}

function lockInfo(): unknown {
  if (chance(0.15)) return randomValue();
  const info: Record<string, unknown> = {
    ID: chance(0.9) ? pick(LOCK_IDS) : randomValue(),
    Operation: 'OperationTypeApply',
    Info: '',
    Who: chance(0.7) ? 'fuzz@host' : randomValue(),
    Version: '1.11.4',
    Created: '2026-11-30T00:00:00Z',
    Path: '',
  };
  if (chance(0.3)) info[pick(['Info', 'Extra', 'Who', 'Operation'])] = randomValue();
  return info;
}

let serial = 1;

/** A terraform 1.11-shaped state: modules, for_each keys, outputs, dependencies. */
function stateDocument(): Record<string, unknown> {
  serial += 1;
  const instance = (key: number | string | undefined, input: unknown) => ({
    ...(key === undefined ? {} : { index_key: key }),
    schema_version: 0,
    attributes: { id: `id-${String(key)}`, input: { value: input, type: 'string' }, output: null },
    sensitive_attributes: [],
    dependencies: ['terraform_data.root'],
  });
  return {
    version: 4,
    terraform_version: '1.11.4',
    serial,
    lineage: 'fuzz-lineage',
    outputs: {
      plain: { value: 'v', type: 'string' },
      secret: { value: 's', type: 'string', sensitive: true },
    },
    resources: [
      {
        mode: 'managed',
        type: 'terraform_data',
        name: 'root',
        provider: 'provider["terraform.io/builtin/terraform"]',
        instances: [instance(undefined, 'root')],
      },
      {
        module: 'module.child["x"]',
        mode: 'managed',
        type: 'terraform_data',
        name: 'item',
        provider: 'provider["terraform.io/builtin/terraform"]',
        instances: [instance(0, 'a'), instance(1, 'b')],
      },
      {
        mode: 'managed',
        type: 'terraform_data',
        name: 'named',
        provider: 'provider["terraform.io/builtin/terraform"]',
        instances: [instance('k\u0000ey', 'nul key'), instance('other', 'o')],
      },
    ],
    check_results: null,
  };
}

/** Replaces, deletes or adds something at a random place of `value`. */
function mutate(value: Record<string, unknown>, times: number): unknown {
  for (let n = 0; n < times; n++) {
    let node: Record<string, unknown> | unknown[] = value;
    for (let depth = int(6); depth > 0; depth--) {
      const keys: (string | number)[] = Array.isArray(node)
        ? node.map((_v, i) => i)
        : Object.keys(node);
      if (keys.length === 0) break;
      const next = (node as Record<string | number, unknown>)[pick(keys)];
      if (typeof next !== 'object' || next === null) break;
      node = next as Record<string, unknown> | unknown[];
    }
    const keys: (string | number)[] = Array.isArray(node)
      ? node.map((_v, i) => i)
      : Object.keys(node);
    const target = keys.length && chance(0.8) ? pick(keys) : `new${int(5)}`;
    if (chance(0.15) && !Array.isArray(node)) delete node[target as string];
    else (node as Record<string | number, unknown>)[target] = randomValue();
  }
  return value;
}

/** Bytes of `text`, sometimes with invalid UTF-8 spliced in. */
function bytes(text: string): Buffer {
  const body = Buffer.from(text, 'utf8');
  if (!chance(0.08)) return body;
  const bad = pick([
    [0xff],
    [0xc3, 0x28],
    [0xc0, 0xaf],
    [0xed, 0xa0, 0x80],
    [0xf4, 0x90, 0x80, 0x80],
    [0xe2, 0x82],
  ]);
  const at = int(body.length + 1);
  return Buffer.concat([body.subarray(0, at), Buffer.from(bad), body.subarray(at)]);
}

/** Every byte of the UTF-8 of `s` percent-encoded (a lone surrogate becomes U+FFFD). */
const percentEncoded = (s: string) =>
  [...Buffer.from(s, 'utf8')].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('');

interface Fuzzed {
  method: string;
  path: string;
  body?: Buffer;
  headers: Record<string, string>;
  /** A terraform backend route, where lock conflicts answer with the holder's LockInfo. */
  backend: boolean;
}

function nextRequest(): Fuzzed {
  // Terraform and kl send JSON bodies as application/json; now and then something else.
  const headers: Record<string, string> = {
    'Content-Type': chance(0.95)
      ? 'application/json'
      : pick(['text/plain', 'application/x-www-form-urlencoded', 'application/merge-patch+json']),
  };
  if (chance(0.1)) {
    headers.Authorization = `Basic ${Buffer.from(`${weirdString().slice(0, 300)}:pw`).toString('base64')}`;
  }
  if (chance(0.1)) headers['X-Kilolock-Actor'] = pick(['ci', 'x'.repeat(300), 'é-latin1']);
  const name = stateName();
  const json = (value: unknown) => bytes(rawJson(value));
  switch (int(13)) {
    case 0:
    case 1:
      return chance(0.5)
        ? {
            method: 'LOCK',
            path: `/v1/states/${name}`,
            body: json(lockInfo()),
            headers,
            backend: true,
          }
        : {
            method: 'POST',
            path: `/v1/state-lock/${name}`,
            body: json(lockInfo()),
            headers,
            backend: true,
          };
    case 2: {
      const body = chance(0.3) ? Buffer.alloc(0) : json(lockInfo());
      return chance(0.5)
        ? { method: 'UNLOCK', path: `/v1/states/${name}`, body, headers, backend: true }
        : { method: 'POST', path: `/v1/state-unlock/${name}`, body, headers, backend: true };
    }
    case 3:
    case 4:
    case 5: {
      const doc = chance(0.15) ? randomValue() : mutate(stateDocument(), int(3));
      const id = chance(0.5)
        ? `?ID=${encodeURIComponent(pick([...LOCK_IDS, '\u0000', 'a&ID=b']))}`
        : '';
      return {
        method: 'POST',
        path: `/v1/states/${name}${id}`,
        body: json(doc),
        headers,
        backend: true,
      };
    }
    case 6:
      return { method: 'DELETE', path: `/v1/states/${name}`, headers, backend: true };
    case 7: {
      const id = chance(0.3) ? `?lock_id=${pick(LOCK_IDS)}` : '';
      return {
        method: 'POST',
        path: `/v1/api/states/${name}/import${id}`,
        body: json(mutate(stateDocument(), int(3))),
        headers,
        backend: false,
      };
    }
    case 8: {
      const config = {
        state: chance(0.8) ? pick(NAMES) : randomValue(),
        source: pick([
          'hashicorp/aws',
          'registry.terraform.io/hashicorp/random',
          'x'.repeat(900),
          weirdString(),
        ]),
        alias: pick([undefined, 'east', 'a'.repeat(700), weirdString()]),
        config: chance(0.8) ? { region: randomValue(), nested: randomValue() } : randomValue(),
      };
      return {
        method: 'PUT',
        path: '/v1/provider-configs',
        body: json(config),
        headers,
        backend: false,
      };
    }
    case 9: {
      const query = new URLSearchParams({
        state: pick(NAMES),
        source: pick(['hashicorp/aws', 'aws', weirdString()]),
      });
      if (chance(0.5)) query.set('alias', pick(['east', weirdString()]));
      return {
        method: chance(0.5) ? 'GET' : 'DELETE',
        path: `/v1/provider-configs?${query.toString()}`,
        headers,
        backend: false,
      };
    }
    case 10: {
      const sql = pick([
        'SELECT name, current_serial FROM states',
        'SELECT address, attributes FROM current_resources LIMIT 5',
        'SELECT $1::text',
        'SELECT $1::jsonb',
        'SELECT * FROM state_locks',
        'DELETE FROM states',
        weirdString(),
      ]);
      const body = {
        sql,
        params: chance(0.5) ? [randomValue()] : undefined,
        max_rows: randomValue(),
      };
      return {
        method: 'POST',
        path: '/v1/query',
        body: json(chance(0.9) ? body : randomValue()),
        headers,
        backend: false,
      };
    }
    case 11: {
      const weird = percentEncoded(weirdString().slice(0, 200)) + pick(['', '%FF', '%ED%A0%80']);
      return {
        method: 'GET',
        path: pick([
          `/v1/api/states/${name}/resources?address_glob=${weird}`,
          `/v1/api/states/${name}/resources/${weird}`,
          `/v1/api/states/${name}/diff?from=${weird}`,
          `/v1/refresh-runs/${weird}`,
          `/v1/drift?state=${weird}`,
        ]),
        headers,
        backend: false,
      };
    }
    default:
      return { method: 'GET', path: `/v1/states/${name}`, headers, backend: true };
  }
}

// --- sending, and judging the answer ----------------------------------------

function send(r: Fuzzed): Promise<{ status: number; text: string }> {
  const { hostname, port } = new URL(kld.url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { method: r.method, hostname, port, path: r.path, headers: r.headers, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }),
        );
      },
    );
    req.on('error', reject);
    req.end(r.body);
  });
}

/** What is wrong with an answer; null when it is acceptable. */
function judge(r: Fuzzed, status: number, text: string): string | null {
  if (status >= 500 || status < 200) return `status ${status}`;
  if (status < 400) return null;
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return `${status} without a JSON body`;
  }
  const error = (body as { error?: { code?: unknown; message?: unknown } }).error;
  if (typeof error?.code === 'string' && typeof error.message === 'string') return null;
  // Terraform reads the holder's LockInfo from a lock conflict.
  if (
    r.backend &&
    (status === 423 || status === 409) &&
    typeof (body as { ID?: unknown }).ID !== 'undefined'
  ) {
    return null;
  }
  return `${status} body is neither {error:{code,message}} nor a LockInfo`;
}

function describeRequest(r: Fuzzed): string {
  const body = r.body ? r.body.toString('utf8') : '';
  return `${r.method} ${r.path.slice(0, 120)} ${body.length > 300 ? `${body.slice(0, 300)}… (${body.length} bytes)` : body}`;
}

describe(`random requests (seed ${SEED}, KL_FUZZ_SEED=${SEED} replays it)`, () => {
  it(`answers ${REQUESTS} random requests with 2xx or 4xx, never 5xx`, async () => {
    const failures: string[] = [];
    const statuses = new Map<number, number>();
    let sent = 0;
    const worker = async () => {
      while (sent < REQUESTS) {
        sent++;
        const r = nextRequest();
        const { status, text } = await send(r);
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
        const wrong = judge(r, status, text);
        if (wrong)
          failures.push(`seed ${SEED}: ${wrong}: ${text.slice(0, 200)}\n  ${describeRequest(r)}`);
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    if (process.env.KL_FUZZ_VERBOSE) {
      // Answers by status, and what kld logged for any 500.
      console.log(SEED, [...statuses].sort());
      console.log(
        kld
          .output()
          .split('\n')
          .filter((l) => l.includes('unhandled error'))
          .join('\n'),
      );
    }
    expect(failures).toEqual([]);
    // The run did reach both sides: accepted writes and refusals.
    expect([...statuses.keys()].some((s) => s < 300)).toBe(true);
    expect([...statuses.keys()].some((s) => s >= 400)).toBe(true);
    expect(kld.output()).not.toContain('unhandled error');
  });

  it('is ready afterwards with every projector caught up, and replays its whole log', async () => {
    const ready = await send({ method: 'GET', path: '/readyz', headers: {}, backend: false });
    expect({ seed: SEED, status: ready.status, body: JSON.parse(ready.text) }).toEqual({
      seed: SEED,
      status: 200,
      body: {
        status: 'ready',
        checks: { database: true, migrations: true, projections: true, readModels: true },
      },
    });
    const rebuilt = await send({
      method: 'POST',
      path: '/v1/admin/projections/rebuild',
      headers: {},
      backend: false,
    });
    expect({ seed: SEED, status: rebuilt.status }).toEqual({ seed: SEED, status: 200 });
    expect(kld.output()).not.toContain('projection halted');
  });

  it('still serves terraform and kl', async () => {
    const dir = fs.mkdtempSync(path.join(root, 'tf-'));
    fs.writeFileSync(path.join(dir, 'terraformrc.hcl'), 'disable_checkpoint = true\n');
    const state = `${kld.url}/v1/states/fuzz/terraform`;
    fs.writeFileSync(
      path.join(dir, 'main.tf'),
      `terraform {
  backend "http" {
    address        = "${state}"
    lock_address   = "${state}"
    unlock_address = "${state}"
    lock_method    = "LOCK"
    unlock_method  = "UNLOCK"
  }
}
resource "terraform_data" "n" {
  for_each = toset(["a", "b\\u0000c"])
  input    = "\${each.key} 😀"
}
output "keys" {
  value = keys(terraform_data.n)
}
`,
    );
    const env = {
      ...Object.fromEntries(
        Object.entries(process.env).filter(([k]) => !k.startsWith('TF_') && !k.startsWith('KL_')),
      ),
      TF_CLI_CONFIG_FILE: path.join(dir, 'terraformrc.hcl'),
      CHECKPOINT_DISABLE: '1',
      TF_IN_AUTOMATION: '1',
      TF_INPUT: '0',
    };
    for (const args of [
      ['init', '-input=false', '-no-color'],
      ['apply', '-auto-approve', '-input=false', '-no-color'],
      ['plan', '-detailed-exitcode', '-input=false', '-no-color'],
    ]) {
      const r = await new Promise<{ code: number | null; out: string }>((resolve) => {
        const child = spawn(TERRAFORM, args, { cwd: dir, env });
        let out = '';
        child.stdout.on('data', (c: Buffer) => (out += c.toString()));
        child.stderr.on('data', (c: Buffer) => (out += c.toString()));
        child.on('close', (code) => resolve({ code, out }));
      });
      expect({ seed: SEED, args, code: r.code, out: r.code === 0 ? '' : r.out }).toEqual({
        seed: SEED,
        args,
        code: 0,
        out: '',
      });
    }
    // The fuzzed server may hold thousands of states with long names: a
    // listing past spawnSync's default 1 MiB would kill kl (ENOBUFS).
    const kl = (args: string[]) =>
      spawnSync(process.execPath, [KL, ...args, '--format', 'json'], {
        encoding: 'utf8',
        maxBuffer: 256 * 1024 * 1024,
        env: { ...process.env, KL_SERVER_URL: kld.url },
      });
    const states = kl(['states']);
    expect({ code: states.status, stderr: states.stderr, error: states.error?.message }).toEqual({
      code: 0,
      stderr: '',
      error: undefined,
    });
    expect(JSON.parse(states.stdout)).toEqual(
      expect.arrayContaining([expect.objectContaining({ name: 'fuzz/terraform' })]),
    );
    const locks = kl(['locks']);
    expect({ code: locks.status, stderr: locks.stderr, error: locks.error?.message }).toEqual({
      code: 0,
      stderr: '',
      error: undefined,
    });
    expect(Array.isArray(JSON.parse(locks.stdout))).toBe(true);
  });
});
