import { spawn, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { freePort } from '../../src/infrastructure/postgres/embedded-postgres';
import { KL, KldProcess, startKld } from '../support/kld-process';
import { sample } from '../support/prometheus-text';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/** The built `kl` as a child process against a real kld. */

jest.setTimeout(60_000);

let t: TestDatabase;
let kld: KldProcess;
let dir: string;
const state = `cli/${randomUUID().slice(0, 8)}`;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

interface KlOptions {
  input?: string;
  server?: string;
  env?: Record<string, string>;
}

function kl(args: string[], options: KlOptions = {}): Run {
  const r = spawnSync(process.execPath, [KL, ...args], {
    input: options.input ?? '',
    encoding: 'utf8',
    env: {
      ...process.env,
      KL_SERVER_URL: options.server ?? kld.url,
      KL_ACTOR: 'cli-tester',
      ...options.env,
    },
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/**
 * The spec's own requests each on a new connection: its kl runs block this
 * process (spawnSync), under load for longer than kld keeps an idle
 * connection (65 s), and fetch then reused one kld had closed meanwhile
 * ("other side closed").
 */
const FRESH_CONNECTION = { Connection: 'close' };

/** Exit 0 and nothing on stderr. */
function ok(args: string[], options?: KlOptions): string {
  const r = kl(args, options);
  expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
  return r.stdout;
}

/** A failure: the exit code and exactly one readable line on stderr. */
function fails(
  args: string[],
  code: 1 | 2,
  message: RegExp,
  server?: string,
  options: KlOptions = {},
): void {
  const r = kl(args, { ...options, server });
  expect(r.code).toBe(code);
  const lines = r.stderr.trimEnd().split('\n');
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(/^kl: /);
  expect(lines[0]).toMatch(message);
  expect(r.stderr).not.toMatch(/\n\s+at /);
}

const json = (args: string[]) => JSON.parse(ok([...args, '--format', 'json']));

function doc(serial: number, tags: Record<string, string>): Record<string, unknown> {
  return {
    version: 4,
    terraform_version: '1.11.4',
    serial,
    lineage: 'cli-lineage',
    outputs: { count: { value: Object.keys(tags).length, type: 'number' } },
    resources: [
      {
        mode: 'managed',
        type: 'terraform_data',
        name: 'leader',
        provider: 'provider["terraform.io/builtin/terraform"]',
        instances: [
          {
            schema_version: 0,
            attributes: { id: 'leader', input: null, output: null, triggers_replace: null },
            sensitive_attributes: [],
          },
        ],
      },
      {
        module: 'module.herd',
        mode: 'managed',
        type: 'terraform_data',
        name: 'tag',
        provider: 'provider["terraform.io/builtin/terraform"]',
        each: 'map',
        instances: Object.entries(tags).map(([key, value]) => ({
          index_key: key,
          schema_version: 0,
          attributes: {
            id: `tag-${key}`,
            input: { value, type: 'string' },
            output: { value, type: 'string' },
            triggers_replace: null,
          },
          sensitive_attributes: [],
          dependencies: ['terraform_data.leader'],
        })),
      },
    ],
    check_results: null,
  };
}

const v1 = doc(1, { a: 'one', b: 'two' });
const v2 = doc(2, { a: 'uno', c: 'three' });

beforeAll(async () => {
  t = await createTestDatabase('kl_cli');
  kld = await startKld({ KL_DATABASE_URL: t.url });
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-cli-'));
  fs.writeFileSync(path.join(dir, 'v1.tfstate'), JSON.stringify(v1, null, 2));
  fs.writeFileSync(path.join(dir, 'v2.tfstate'), JSON.stringify(v2, null, 2));
});

afterAll(async () => {
  await kld?.stop();
  await t?.drop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

describe('import, export, show', () => {
  it('imports a file as a version with source import', () => {
    expect(json(['import', path.join(dir, 'v1.tfstate'), '--name', state])).toEqual([
      { state, version: 1, instances: 3, file: path.join(dir, 'v1.tfstate') },
    ]);
    expect(ok(['import', path.join(dir, 'v2.tfstate'), '--name', state])).toContain('│ 2 ');
    expect(json(['history', state]).map((v: { source: string }) => v.source)).toEqual([
      'import',
      'import',
    ]);
  });

  it('exports what was imported, current and by serial, to stdout or a file', () => {
    expect(JSON.parse(ok(['export', state]))).toEqual(v2);
    const out = path.join(dir, 'out.tfstate');
    expect(ok(['export', state, '--serial', '1', '-o', out])).toBe('');
    expect(JSON.parse(fs.readFileSync(out, 'utf8'))).toEqual(v1);
  });

  it('shows a state: version, serial, lineage, outputs and instances (table, json), instances (csv)', () => {
    const table = ok(['show', state]);
    expect(table).toMatch(/│ version\s+│ 2\s+│/);
    expect(table).toMatch(/│ serial\s+│ 2\s+│/);
    expect(table).toMatch(/│ lineage\s+│ cli-lineage\s+│/);
    expect(table).toMatch(/│ count\s+│ number\s+│ 2\s+│/);
    expect(table).toMatch(/address\s+│ type/);
    expect(table).toContain('module.herd.terraform_data.tag["c"]');
    expect(ok(['show', state, '--serial', '1', '--format', 'csv']).split('\r\n')).toEqual([
      'address,type,provider,status',
      'terraform_data.leader,terraform_data,"provider[""terraform.io/builtin/terraform""]",',
      '"module.herd.terraform_data.tag[""a""]",terraform_data,"provider[""terraform.io/builtin/terraform""]",',
      '"module.herd.terraform_data.tag[""b""]",terraform_data,"provider[""terraform.io/builtin/terraform""]",',
      '',
    ]);
    expect(json(['show', state])).toEqual({
      state,
      version: 2,
      serial: 2,
      lineage: 'cli-lineage',
      terraform_version: '1.11.4',
      outputs: { count: { value: 2, type: 'number', sensitive: false } },
      instances: [
        {
          address: 'terraform_data.leader',
          type: 'terraform_data',
          provider: 'provider["terraform.io/builtin/terraform"]',
          status: null,
        },
        expect.objectContaining({ address: 'module.herd.terraform_data.tag["a"]' }),
        expect.objectContaining({ address: 'module.herd.terraform_data.tag["c"]' }),
      ],
    });
    expect(json(['show', state, '--version', '1'])).toMatchObject({ version: 1, serial: 1 });
  });

  it('refuses a file that is not a terraform state before sending it', () => {
    const bad = path.join(dir, 'bad.tfstate');
    fs.writeFileSync(bad, JSON.stringify({ version: 3, serial: 1 }));
    fails(['import', bad, '--name', state], 1, /bad\.tfstate is not a valid terraform state/);
    fs.writeFileSync(bad, '{"version": 4,');
    fails(['import', bad, '--name', state], 1, /not a valid terraform state/);
    fails(['import', path.join(dir, 'missing.tfstate'), '--name', state], 2, /no such file/);
    fails(['import', path.join(dir, 'v1.tfstate')], 2, /required option '--name <state>'/);
    expect(json(['history', state])).toHaveLength(2);
  });
});

describe('listings', () => {
  it('lists states in table, json and csv', () => {
    expect(ok(['states'])).toMatch(new RegExp(`│ ${state.replace('/', '\\/')}\\s+│ 2\\s+│ 2 `));
    expect(json(['states'])).toEqual([
      {
        name: state,
        version: 2,
        serial: 2,
        resources: 2,
        instances: 3,
        terraform_version: '1.11.4',
        updated_at: expect.any(String),
        locked_by: null,
        over_quota: null,
      },
    ]);
    const csv = ok(['states', '--format', 'csv']).split('\r\n');
    expect(csv[0]).toBe(
      'name,version,serial,resources,instances,terraform_version,updated_at,locked_by,over_quota',
    );
    expect(csv[1]).toMatch(new RegExp(`^${state},2,2,2,3,1\\.11\\.4,[^,]+,,$`));
  });

  it('lists history', () => {
    const csv = ok(['history', state, '--format', 'csv']).split('\r\n');
    expect(csv[0]).toBe(
      'version,serial,lineage,lineage_changed_from,source,actor,terraform_version,resources,instances,created_at',
    );
    expect(csv[1]).toMatch(/^1,1,cli-lineage,,import,cli-tester,1\.11\.4,2,3,/);
    expect(csv[2]).toMatch(/^2,2,cli-lineage,,import,cli-tester,1\.11\.4,2,3,/);
  });

  it('lists resources, filtered by an address glob', () => {
    expect(
      json(['resources', state, '--address-glob', 'module.herd.*']).map(
        (r: { address: string }) => r.address,
      ),
    ).toEqual(['module.herd.terraform_data.tag["a"]', 'module.herd.terraform_data.tag["c"]']);
    expect(ok(['resources', state])).toContain('terraform_data.leader');
    expect(ok(['resources', state, '--address-glob', 'nothing.*', '--format', 'csv'])).toBe(
      'address,type,module,provider,status,since_serial\r\n',
    );
  });

  it('shows one resource, and its history with the attributes each version changed', () => {
    const address = 'module.herd.terraform_data.tag["a"]';
    expect(json(['resource', state, address])).toEqual({
      address,
      type: 'terraform_data',
      module: 'module.herd',
      provider: 'provider["terraform.io/builtin/terraform"]',
      status: null,
      since_version: 2,
      since_serial: 2,
      dependencies: ['terraform_data.leader'],
      attributes: {
        id: 'tag-a',
        input: { value: 'uno', type: 'string' },
        output: { value: 'uno', type: 'string' },
        triggers_replace: null,
      },
    });
    expect(ok(['resource', state, address])).toMatch(
      /│ attributes\.input\s+│ \{"type":"string","value":"uno"\}\s+│/,
    );
    expect(json(['resource', state, address, '--version', '1']).attributes.input).toEqual({
      value: 'one',
      type: 'string',
    });
    expect(json(['resource', state, address, '--history'])).toEqual([
      expect.objectContaining({ from_serial: 1, until_serial: 2, changed: ['(created)'] }),
      expect.objectContaining({
        from_serial: 2,
        until_serial: null,
        changed: ['input.value', 'output.value'],
      }),
    ]);
    fails(['resource', state, 'terraform_data.nope'], 1, /has no resource terraform_data\.nope/);
  });

  it('diffs two serials: added, removed and changed with attribute paths', () => {
    expect(json(['diff', state, '--from', '1', '--to', '2'])).toEqual([
      { change: 'added', address: 'module.herd.terraform_data.tag["c"]', paths: [] },
      { change: 'removed', address: 'module.herd.terraform_data.tag["b"]', paths: [] },
      {
        change: 'changed',
        address: 'module.herd.terraform_data.tag["a"]',
        paths: ['input.value', 'output.value'],
      },
    ]);
    expect(ok(['diff', state, '--from', '1'])).toMatch(
      /changed\s+│ module\.herd.*input\.value, output\.value/,
    );
    fails(['diff', state], 2, /--from/);
    fails(['diff', state, '--from', 'x'], 2, /--from must be a non-negative integer/);
    fails(['diff', state, '--from', '9'], 1, /no version with serial 9/);
    expect(json(['diff', state, '--from-version', '1', '--to-version', '2'])).toEqual(
      json(['diff', state, '--from', '1', '--to', '2']),
    );
    fails(['diff', state, '--from', '1', '--from-version', '1'], 2, /--from or --from-version/);
    fails(['diff', state, '--from-version', '7'], 1, /has no version 7/);
  });

  it('lists resources as they were at one version', () => {
    expect(
      json(['resources', state, '--version', '1']).map((r: { address: string }) => r.address),
    ).toEqual([
      'module.herd.terraform_data.tag["a"]',
      'module.herd.terraform_data.tag["b"]',
      'terraform_data.leader',
    ]);
    expect(json(['resources', state, '--serial', '1'])).toEqual(
      json(['resources', state, '--version', '1']),
    );
    fails(['resources', state, '--version', '9'], 1, /has no version 9/);
    fails(['resources', state, '--version', '1', '--serial', '1'], 2, /--serial or --version/);
  });
});

describe('locks', () => {
  it('lists a held lock and force-unlocks it', async () => {
    const id = randomUUID();
    const info = {
      ID: id,
      Operation: 'OperationTypeApply',
      Info: '',
      Who: 'alice@host',
      Version: '1.11.4',
      Created: new Date().toISOString(),
      Path: '',
    };
    const r = await fetch(`${kld.url}/v1/states/${state}`, {
      method: 'LOCK',
      headers: { ...FRESH_CONNECTION, 'Content-Type': 'application/json' },
      body: JSON.stringify(info),
    });
    expect(r.status).toBe(200);
    expect(json(['locks'])).toEqual([
      {
        state,
        lock_id: id,
        // Not a plan's lock: it holds the state alone.
        mode: 'write',
        who: 'alice@host',
        operation: 'OperationTypeApply',
        acquired_at: expect.any(String),
        acquired_by: 'anonymous',
      },
    ]);
    expect(json(['states'])[0].locked_by).toBe('alice@host');
    // A write without the lock is refused with the server's message.
    fails(['import', path.join(dir, 'v1.tfstate'), '--name', state], 1, /lock/i);
    // Someone else's lock, no terminal to ask on: refused, still locked.
    fails(
      ['force-unlock', state],
      1,
      new RegExp(`lock ${id} on ${state}, held by alice@host.*--yes`),
    );
    expect(json(['locks'])).toHaveLength(1);
    expect(json(['force-unlock', state, '--yes'])).toEqual([
      { state, released_lock_id: id, held_by: 'alice@host' },
    ]);
    expect(ok(['locks', '--format', 'csv'])).toBe(
      'state,lock_id,mode,who,operation,acquired_at,acquired_by\r\n',
    );
  });
});

describe('query', () => {
  const sql = `SELECT address, create_serial FROM current_resources
                WHERE state_name = '${state}' ORDER BY address`;

  it('takes SQL as an argument, from a file and from stdin', () => {
    const expected = [
      { address: 'module.herd.terraform_data.tag["a"]', create_serial: 2 },
      { address: 'module.herd.terraform_data.tag["c"]', create_serial: 2 },
      { address: 'terraform_data.leader', create_serial: 1 },
    ];
    expect(json(['query', sql])).toEqual(expected);
    const file = path.join(dir, 'q.sql');
    fs.writeFileSync(file, sql);
    expect(json(['query', '-f', file])).toEqual(expected);
    expect(JSON.parse(ok(['query', '-', '--format', 'json'], { input: sql }))).toEqual(expected);
    expect(ok(['query', sql, '--format', 'csv'])).toBe(
      'address,create_serial\r\n"module.herd.terraform_data.tag[""a""]",2\r\n"module.herd.terraform_data.tag[""c""]",2\r\nterraform_data.leader,1\r\n',
    );
    expect(ok(['query', 'SELECT $1::text AS p', '-p', 'x'])).toMatch(/│ x /);
  });

  it('warns on stderr when the result is truncated, and still succeeds', () => {
    const r = kl([
      'query',
      'SELECT g FROM generate_series(1, 10) g',
      '--max-rows',
      '3',
      '--format',
      'csv',
    ]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('g\r\n1\r\n2\r\n3\r\n');
    expect(r.stderr).toBe(
      'kl: result truncated at 3 rows (raise --max-rows or narrow the query)\n',
    );
  });

  it('fails with the server message for refused, slow and wrong SQL', () => {
    fails(['query', 'SELECT * FROM kl_events'], 1, /^kl: permission denied for table kl_events$/);
    fails(['query', 'SELECT pg_sleep(3)', '--timeout', '200ms'], 1, /timeout of 200 ms/);
    fails(['query', 'SELEC 1'], 1, /syntax error at or near "SELEC"/);
  });

  it('refuses usage mistakes with exit 2', () => {
    fails(['query'], 2, /missing SQL/);
    fails(['query', 'SELECT 1', '-f', 'x.sql'], 2, /not both/);
    fails(['query', '-f', path.join(dir, 'nope.sql')], 2, /no such file/);
    fails(['query', 'SELECT 1', '--timeout', 'soon'], 2, /--timeout/);
    fails(['query', 'SELECT 1', '--max-rows', '-1'], 2, /max-rows/);
  });
});

describe('operations and errors', () => {
  it('rebuilds projections, and the read models answer the same afterwards', () => {
    const before = json(['resources', state]);
    const rows = json(['projections', 'rebuild']);
    expect(rows.length).toBeGreaterThan(0);
    expect(rows[0]).toEqual({ projector: expect.any(String), events: expect.any(Number) });
    expect(json(['resources', state])).toEqual(before);
  });

  it('says which server it could not reach', async () => {
    const port = await freePort();
    fails(
      ['states'],
      1,
      new RegExp(`cannot reach kld at http://127\\.0\\.0\\.1:${port} \\(ECONNREFUSED\\)`),
      `http://127.0.0.1:${port}`,
    );
  });

  it('shows server errors as one line', () => {
    fails(['history', 'no-such-state'], 1, /^kl: no state named "no-such-state"$/);
    fails(['export', 'no-such-state'], 1, /^kl: no state named "no-such-state"$/);
  });

  it('exits 2 on unknown commands and options, 0 on --help for every command', () => {
    fails(['nope'], 2, /unknown command 'nope'/);
    fails(['states', '--bogus'], 2, /unknown option '--bogus'/);
    fails(['--format', 'xml', 'states'], 2, /--format/);
    for (const command of [
      ['query'],
      ['states'],
      ['history'],
      ['show'],
      ['resources'],
      ['resource'],
      ['diff'],
      ['import'],
      ['export'],
      ['locks'],
      ['force-unlock'],
      ['projections', 'rebuild'],
      ['version'],
    ]) {
      const r = kl([...command, '--help']);
      expect(r.code).toBe(0);
      expect(r.stdout).toContain(`Usage: kl ${command.join(' ')}`);
    }
  });
});

/**
 * LOCK a state over HTTP as terraform would, with `who` as LockInfo.Who, on
 * a connection of its own: fetch would reuse an idle keep-alive socket the
 * server may have closed meanwhile, and it does not retry a LOCK.
 */
async function lockAs(name: string, who: string): Promise<string> {
  const id = randomUUID();
  const body = JSON.stringify({ ID: id, Operation: 'OperationTypeApply', Who: who, Info: '' });
  const { hostname, port } = new URL(kld.url);
  const status = await new Promise<number | undefined>((resolve, reject) => {
    const req = http.request(
      {
        method: 'LOCK',
        hostname,
        port,
        path: `/v1/states/${name}`,
        agent: false,
        headers: { 'Content-Type': 'application/json' },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
  expect(status).toBe(200);
  return id;
}

/** GET on a connection of its own (see lockAs): status, content type and body text. */
async function get(
  pathAndQuery: string,
): Promise<{ status?: number; type?: string; text: string }> {
  const { hostname, port } = new URL(kld.url);
  return new Promise((resolve, reject) => {
    const req = http.request({ hostname, port, path: pathAndQuery, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({
          status: res.statusCode,
          type: res.headers['content-type'],
          text: Buffer.concat(chunks).toString('utf8'),
        }),
      );
    });
    req.on('error', reject);
    req.end();
  });
}

function writeState(name: string, document: Record<string, unknown> | string): string {
  const file = path.join(dir, name);
  fs.writeFileSync(file, typeof document === 'string' ? document : JSON.stringify(document));
  return file;
}

describe('exact numbers', () => {
  it('imports and exports numbers beyond double precision byte for byte', async () => {
    const name = `cli-exact/${randomUUID().slice(0, 8)}`;
    const text = JSON.stringify(doc(1, { a: 'x' })).replace(
      '"count":{"value":1,"type":"number"}',
      '"big":{"value":12345678901234567890,"type":"number"},"frac":{"value":0.1000000000000000055511151231257827,"type":"number"}',
    );
    expect(text).toContain('12345678901234567890');
    ok(['import', writeState('exact.tfstate', text), '--name', name]);
    const served = await (
      await fetch(`${kld.url}/v1/states/${name}`, { headers: FRESH_CONNECTION })
    ).text();
    const exported = ok(['export', name]);
    expect(exported).toBe(served);
    expect(exported.match(/"value": [-0-9.e+]+/g)).toEqual([
      '"value": 12345678901234567890',
      '"value": 0.1000000000000000055511151231257827',
    ]);
    const shown = ok(['show', name, '--format', 'json']);
    expect(shown).toContain('"value": 12345678901234567890');
    expect(shown).toContain('"value": 0.1000000000000000055511151231257827');
    expect(ok(['show', name])).toMatch(/│ big\s+│ number\s+│ 12345678901234567890\s+│/);
  });
});

describe('exact numbers on every read path', () => {
  const name = `cli-exact-reads/${randomUUID().slice(0, 8)}`;
  const FRAC = '0.1000000000000000055511151231257827';
  const BIG1 = '12345678901234567890';
  // Differs from BIG1 only beyond double precision: as doubles, both are 12345678901234567000.
  const BIG2 = '12345678901234567891';
  const ADDRESS = 'terraform_data.n';
  const exactDoc = (serial: number, big: string): string =>
    `{"version":4,"terraform_version":"1.11.4","serial":${serial},"lineage":"exact-reads",` +
    `"outputs":{"big":{"value":${big},"type":"number"},"frac":{"value":${FRAC},"type":"number"}},` +
    `"resources":[{"mode":"managed","type":"terraform_data","name":"n",` +
    `"provider":"provider[\\"terraform.io/builtin/terraform\\"]","instances":[{"schema_version":0,` +
    `"attributes":{"id":"n","input":{"value":{"big":${big},"frac":${FRAC}},` +
    `"type":["object",{"big":"number","frac":"number"}]},"output":null,"triggers_replace":null},` +
    `"sensitive_attributes":[]}]}],"check_results":null}`;
  const api = async (route: string): Promise<string> => {
    const res = await get(`/v1/api/states/${name}/${route}`);
    expect(res.status).toBe(200);
    expect(res.type).toMatch(/^application\/json/);
    expect(res.text).not.toMatch(/\uF8FE/);
    return res.text;
  };

  beforeAll(() => {
    ok(['import', writeState('exact-1.tfstate', exactDoc(1, BIG1)), '--name', name]);
    ok(['import', writeState('exact-2.tfstate', exactDoc(2, BIG2)), '--name', name]);
  });

  it('kl resource shows the attribute digits, now, at a version and across its history', () => {
    const now = ok(['resource', name, ADDRESS, '--format', 'json']);
    expect(now).toContain(`"big": ${BIG2}`);
    expect(now).toContain(`"frac": ${FRAC}`);
    expect(ok(['resource', name, ADDRESS, '--version', '1', '--format', 'json'])).toContain(
      `"big": ${BIG1}`,
    );
    const history = json(['resource', name, ADDRESS, '--history']);
    expect(history.map((l: Record<string, unknown>) => l.changed)).toEqual([
      ['(created)'],
      ['input.value.big'],
    ]);
  });

  it('the REST resource, resource history and resources routes answer the exact digits', async () => {
    const route = `resources/${encodeURIComponent(ADDRESS)}`;
    const current = await api(route);
    expect(current).toContain(`"big":${BIG2}`);
    expect(current).toContain(`"frac":${FRAC}`);
    const history = await api(`${route}?history=true`);
    expect(history).toContain(`"big":${BIG1}`);
    expect(history).toContain(`"big":${BIG2}`);
    expect(JSON.parse(await api('resources')).resources).toEqual([
      expect.objectContaining({ address: ADDRESS, sinceSerial: 2 }),
    ]);
    expect(json(['resources', name])).toEqual([expect.objectContaining({ address: ADDRESS })]);
  });

  it('kl show and kl diff see the digits of each version', () => {
    const shown = ok(['show', name, '--format', 'json']);
    expect(shown).toContain(`"value": ${BIG2}`);
    expect(shown).toContain(`"value": ${FRAC}`);
    expect(ok(['show', name, '--version', '1', '--format', 'json'])).toContain(`"value": ${BIG1}`);
    expect(json(['diff', name, '--from-version', '1', '--to-version', '2'])).toEqual([
      { change: 'changed', address: ADDRESS, paths: ['input.value.big'] },
    ]);
  });

  it('kl query answers jsonb and json columns with the exact digits', () => {
    const sql =
      "SELECT r.attributes -> 'input' -> 'value' AS attributes, r.instance -> 'attributes' -> 'input' -> 'value' AS instance, o.value AS output FROM current_resources r JOIN outputs o ON o.state_id = r.state_id AND o.name = 'big' AND o.delete_version IS NULL WHERE r.state_name = $1";
    const out = ok(['query', sql, '-p', name, '--format', 'json']);
    expect(out.match(new RegExp(BIG2, 'g'))).toHaveLength(3);
    expect(out.match(new RegExp(FRAC.replace('.', '\\.'), 'g'))).toHaveLength(2);
    expect(out).not.toMatch(/\uF8FE/);
  });

  it('a provider config keeps its digits from the file to kl provider get', async () => {
    const file = path.join(dir, 'exact-config.json');
    fs.writeFileSync(file, `{"max_retries": ${BIG1}, "ratio": ${FRAC}}`);
    ok(['provider', 'configure', name, 'hashicorp/aws', '--from-json', file]);
    const got = ok(['provider', 'get', name, 'hashicorp/aws', '--format', 'json']);
    expect(got).toContain(`"max_retries": ${BIG1}`);
    expect(got).toContain(`"ratio": ${FRAC}`);
    const res = await get(
      `/v1/provider-configs?state=${encodeURIComponent(name)}&source=hashicorp/aws`,
    );
    expect(res.text).toContain(`"max_retries":${BIG1}`);
  });
});

describe('lineage and serial on import', () => {
  const name = `cli-lineage/${randomUUID().slice(0, 8)}`;
  const versions = () => json(['history', name]).length;

  it('refuses another lineage or an older serial without --force, writing nothing', () => {
    ok(['import', writeState('l5.tfstate', doc(5, { a: 'x' })), '--name', name]);
    const other = writeState('other.tfstate', { ...doc(6, { a: 'y' }), lineage: 'other-lineage' });
    fails(
      ['import', other, '--name', name],
      1,
      /has lineage "cli-lineage", the document has lineage "other-lineage"; nothing imported \(kl import --force/,
    );
    const older = writeState('l4.tfstate', doc(4, { a: 'y' }));
    fails(['import', older, '--name', name], 1, /at serial 5, the document has the older serial 4/);
    expect(versions()).toBe(1);
  });

  it('imports them with --force, and history shows the lineage that was replaced', () => {
    ok(['import', path.join(dir, 'l4.tfstate'), '--name', name, '--force']);
    ok(['import', path.join(dir, 'other.tfstate'), '--name', name, '--force']);
    expect(
      json(['history', name]).map((v: Record<string, unknown>) => [
        v.serial,
        v.lineage,
        v.lineage_changed_from,
      ]),
    ).toEqual([
      [5, 'cli-lineage', null],
      [4, 'cli-lineage', null],
      [6, 'other-lineage', 'cli-lineage'],
    ]);
  });

  it('says which version a repeated serial picked, and --version picks exactly', () => {
    // Serial 5 again (a forced push of the same serial): versions 1 and 4 carry it.
    ok(['import', writeState('l5b.tfstate', doc(5, { b: 'z' })), '--name', name, '--force']);
    const r = kl(['export', name, '--serial', '5']);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe(
      'kl: serial 5 is carried by versions 1, 4; using version 4 (pick one with --version)\n',
    );
    expect(JSON.parse(r.stdout)).toEqual(doc(5, { b: 'z' }));
    expect(JSON.parse(ok(['export', name, '--version', '1']))).toEqual(doc(5, { a: 'x' }));
    fails(['export', name, '--version', '1', '--serial', '5'], 2, /--serial or --version/);
    fails(['export', name, '--version', '99'], 1, /has no version 99/);
  });

  it('shows the history of a deleted state and says it was deleted', async () => {
    expect(
      (await fetch(`${kld.url}/v1/states/${name}`, { method: 'DELETE', headers: FRESH_CONNECTION }))
        .status,
    ).toBe(200);
    const r = kl(['history', name, '--format', 'csv']);
    expect(r.code).toBe(0);
    expect(r.stdout.split('\r\n')).toHaveLength(6); // header, 4 versions, end
    expect(r.stderr).toMatch(new RegExp(`^kl: state "${name}" was deleted at \\S+\\n$`));
    fails(['export', name, '--serial', '5'], 1, /was deleted at/);
  });
});

describe('force-unlock', () => {
  const name = `cli-unlock/${randomUUID().slice(0, 8)}`;

  beforeAll(() => {
    ok(['import', path.join(dir, 'v1.tfstate'), '--name', name]);
  });

  it('releases your own lock without asking', async () => {
    const id = await lockAs(name, 'cli-tester');
    expect(json(['force-unlock', name])).toEqual([
      { state: name, released_lock_id: id, held_by: 'cli-tester' },
    ]);
    expect(json(['force-unlock', name])).toEqual([
      { state: name, released_lock_id: null, held_by: null },
    ]);
  });

  /** kl on a pseudo-terminal (util-linux `script`), answering `answer` to its question. */
  function onTerminal(args: string[], answer: string): Run {
    const quote = (a: string) => `'${a.replace(/'/g, `'\\''`)}'`;
    const r = spawnSync(
      'script',
      ['-qec', [process.execPath, KL, ...args].map(quote).join(' '), '/dev/null'],
      {
        input: answer,
        encoding: 'utf8',
        timeout: 30_000,
        env: { ...process.env, KL_SERVER_URL: kld.url, KL_ACTOR: 'cli-tester' },
      },
    );
    return { code: r.status, stdout: r.stdout, stderr: r.stderr };
  }

  it("asks on a terminal before releasing someone else's lock", async () => {
    const id = await lockAs(name, 'bob@elsewhere');
    const no = onTerminal(['force-unlock', name], 'n\n');
    expect(no.code).toBe(1);
    expect(no.stdout).toContain(`Release the lock ${id} on ${name}, held by bob@elsewhere`);
    expect(no.stdout).toContain('kl: not released');
    expect(json(['locks']).map((l: { lock_id: string }) => l.lock_id)).toContain(id);

    const yes = onTerminal(['force-unlock', name], 'y\n');
    expect(yes.code).toBe(0);
    expect(yes.stdout).toMatch(
      new RegExp(`│ ${name.replace('/', '\\/')}\\s+│ ${id}\\s+│ bob@elsewhere`),
    );
    expect(json(['locks']).map((l: { lock_id: string }) => l.lock_id)).not.toContain(id);
  });

  it('refuses without a terminal unless --yes', async () => {
    const id = await lockAs(name, 'bob@elsewhere');
    fails(['force-unlock', name], 1, /held by bob@elsewhere.*not yours; pass --yes to release it/);
    expect(json(['locks']).map((l: { lock_id: string }) => l.lock_id)).toContain(id);
    expect(json(['force-unlock', name, '-y'])[0].released_lock_id).toBe(id);
  });
});

describe('sensitive values', () => {
  const name = `cli-secret/${randomUUID().slice(0, 8)}`;
  const secretDoc = {
    ...doc(1, {}),
    outputs: {
      password: { value: 'hunter2', type: 'string', sensitive: true },
      endpoint: { value: 'db.internal', type: 'string' },
    },
    resources: [
      {
        mode: 'managed',
        type: 'terraform_data',
        name: 'db',
        provider: 'provider["terraform.io/builtin/terraform"]',
        instances: [
          {
            schema_version: 0,
            attributes: {
              id: 'db',
              input: { value: { user: 'admin', pass: 's3cret' }, type: ['object', {}] },
              output: { value: 'plain', type: 'string' },
              triggers_replace: null,
            },
            sensitive_attributes: [
              [
                { type: 'get_attr', value: 'input' },
                { type: 'get_attr', value: 'value' },
                { type: 'index', value: { value: 'pass', type: 'string' } },
              ],
            ],
          },
        ],
      },
    ],
  };

  beforeAll(() => {
    ok(['import', writeState('secret.tfstate', secretDoc), '--name', name]);
  });

  it('masks sensitive outputs in kl show unless --show-sensitive', () => {
    const table = ok(['show', name]);
    expect(table).toMatch(/│ password\s+│ string\s+│ \(sensitive value\)\s+│/);
    expect(table).toMatch(/│ endpoint\s+│ string\s+│ db\.internal\s+│/);
    expect(table).not.toContain('hunter2');
    expect(json(['show', name]).outputs.password).toEqual({
      value: '(sensitive value)',
      type: 'string',
      sensitive: true,
    });
    expect(json(['show', name, '--show-sensitive']).outputs.password.value).toBe('hunter2');
  });

  it('masks sensitive attributes in kl resource unless --show-sensitive', () => {
    expect(json(['resource', name, 'terraform_data.db']).attributes.input).toEqual({
      value: { user: 'admin', pass: '(sensitive value)' },
      type: ['object', {}],
    });
    expect(ok(['resource', name, 'terraform_data.db'])).not.toContain('s3cret');
    expect(
      json(['resource', name, 'terraform_data.db', '--show-sensitive']).attributes.input.value.pass,
    ).toBe('s3cret');
  });
});

describe('query rough edges', () => {
  it('shows $1 in single quotes in its help, where the shell leaves it alone', () => {
    const help = ok(['query', '--help']);
    expect(help).toContain(
      "kl query 'SELECT type, count(*) FROM current_resources WHERE state_name = $1 GROUP BY 1' -p prod",
    );
    expect(help).not.toMatch(/"[^"\n]*\$1[^"\n]*"/);
  });

  it('names --timeout and --max-rows when they are out of range, and takes 10s', () => {
    fails(
      ['query', 'SELECT 1', '--timeout', '10m'],
      2,
      /^kl: --timeout must be at most 5m, got "10m"$/,
    );
    fails(['query', 'SELECT 1', '--max-rows', '0'], 2, /^kl: --max-rows must be from 1 to 100000/);
    expect(json(['query', 'SELECT 1 AS one', '--timeout', '10s'])).toEqual([{ one: 1 }]);
    expect(json(['query', 'SELECT 1 AS one', '--timeout', '2m'])).toEqual([{ one: 1 }]);
  });

  it('refuses COPY … TO STDOUT with a clear line instead of an empty answer', () => {
    fails(['query', 'COPY (SELECT 1) TO STDOUT'], 1, /^kl: COPY is not supported: .*use SELECT/);
  });
});

describe('version and server', () => {
  it('prints its own version and the server version, as text or JSON', () => {
    const { version } = JSON.parse(
      fs.readFileSync(path.join(__dirname, '../../package.json'), 'utf8'),
    ) as {
      version: string;
    };
    expect(ok(['version'])).toBe(`kl ${version}\nkld ${version}\n`);
    expect(json(['version'])).toEqual({ kl: version, kld: version });
    expect(json(['version', '--client'])).toEqual({ kl: version });
  });

  it('still prints its own version when the server is unreachable, then fails', async () => {
    const port = await freePort();
    const r = kl(['version', '--format', 'json'], { server: `http://127.0.0.1:${port}` });
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stdout)).toEqual({ kl: expect.any(String), kld: null });
    expect(r.stderr).toMatch(/^kl: cannot reach kld at/);
  });

  it('names --server (or KL_SERVER_URL) when it is not a URL', () => {
    fails(
      ['--server', 'not-a-url', 'states'],
      2,
      /--server <url>' argument 'not-a-url' is invalid.*http\(s\) URL/,
    );
    fails(['--server', 'ftp://x', 'states'], 2, /--server <url>' argument 'ftp:\/\/x' is invalid/);
    fails(
      ['states'],
      2,
      /--server <url>' value 'nope' from env 'KL_SERVER_URL' is invalid/,
      'nope',
    );
  });
});

describe('events and archives', () => {
  const name = `cli-events/${randomUUID().slice(0, 8)}`;
  const listed = async () =>
    (
      await t.db.query<{ cursor: string; type: string }>(
        'SELECT cursor, type FROM event_log WHERE stream = $1 ORDER BY cursor',
        [`state-${name}`],
      )
    ).map((r) => `${r.cursor} ${r.type}`);
  const printed = (ndjson: string) =>
    ndjson
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as { position: string; type: string; actor: string })
      .map((e) => `${e.position} ${e.type}`);

  beforeAll(() => {
    ok(['import', path.join(dir, 'v1.tfstate'), '--name', name]);
    ok(['import', path.join(dir, 'v2.tfstate'), '--name', name]);
  });

  it('prints the events of a state as NDJSON, in log order, and resumes after a position', async () => {
    const all = await listed();
    expect(all.length).toBeGreaterThan(4);
    const out = ok(['events', '--state', name, '--format', 'json']);
    expect(printed(out)).toEqual(all);
    expect((JSON.parse(out.split('\n')[0]) as { actor: string }).actor).toBe('cli-tester');
    const from = all[1].split(' ')[0];
    expect(printed(ok(['events', '--state', name, '--from', from, '--format', 'json']))).toEqual(
      all.slice(2),
    );
    const table = ok(['events', '--state', name, '--type', 'ApplyCommitted']).trimEnd().split('\n');
    expect(table[0].split(/\s+/)).toEqual([
      'position',
      'occurred_at',
      'actor',
      'stream',
      'revision',
      'type',
    ]);
    expect(table.slice(1).map((l) => l.split(/\s+/).at(-1))).toEqual([
      'ApplyCommitted',
      'ApplyCommitted',
    ]);
  });

  it('follows new events until interrupted', async () => {
    const child = spawn(
      process.execPath,
      [KL, 'events', '--follow', '--from', 'end', '--state', name, '--format', 'json'],
      { env: { ...process.env, KL_SERVER_URL: kld.url, KL_ACTOR: 'cli-tester' } },
    );
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    try {
      // Subscribed once kld counts the stream (it took the log's end first); then a new
      // version follows. A fixed 1.5 s was not always a start of kl and its call on a loaded
      // machine, and a version written before the end was never printed.
      let open = 0;
      for (let i = 0; i < 300 && open === 0; i++) {
        if (child.exitCode !== null) throw new Error(`kl events exited (${child.exitCode})`);
        const metrics = await (await fetch(`${kld.url}/metrics`)).text();
        open = sample(metrics, 'kilolock_event_subscribers', { transport: 'sse' });
        if (open === 0) await new Promise((r) => setTimeout(r, 100));
      }
      expect(open).toBe(1);
      ok(['import', writeState('v3.tfstate', doc(3, { a: 'uno' })), '--name', name]);
      for (let i = 0; i < 100 && !out.includes('"ApplyCommitted"'); i++) {
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(printed(out).map((l) => l.split(' ')[1])).toContain('ApplyCommitted');
      expect(printed(out)).toEqual((await listed()).slice(-printed(out).length));
    } finally {
      child.kill('SIGINT');
    }
    expect(await exited).toBe(0);
  });

  it('refuses a position that is not one and a type no event has, as one line', () => {
    fails(['events', '--from', 'yesterday'], 1, /"yesterday" is not a position/);
    fails(['events', '--from', '0000000000000001-00000000000fffff'], 1, /is not in this log/);
    fails(['events', '--type', 'ApplyCommited'], 1, /unknown event type "ApplyCommited"/);
  });

  it('exports a history to a file and imports it under a new name with every version', () => {
    const file = path.join(dir, 'events.kla');
    ok(['archive', 'export', name, '-o', file]);
    const [header] = fs.readFileSync(file, 'utf8').split('\n');
    expect(JSON.parse(header)).toMatchObject({
      format: 'kilolock-state-archive',
      version: 1,
      state: name,
    });
    const copy = `${name}-copy`;
    ok(['archive', 'import', file, '--name', copy]);
    // Every version, serial, lineage, source, actor and time, as the original's.
    const original = ok(['history', name, '--format', 'csv']);
    expect(original.trimEnd().split('\r\n')).toHaveLength(4);
    expect(ok(['history', copy, '--format', 'csv'])).toBe(original);
    fails(['archive', 'import', file, '--name', copy], 1, /already/);
  });
});
