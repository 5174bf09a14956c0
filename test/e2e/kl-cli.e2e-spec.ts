import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { freePort } from '../../src/infrastructure/postgres/embedded-postgres';
import { KL, KldProcess, startKld } from '../support/kld-process';
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

function kl(args: string[], options: { input?: string; server?: string } = {}): Run {
  const r = spawnSync(process.execPath, [KL, ...args], {
    input: options.input ?? '',
    encoding: 'utf8',
    env: { ...process.env, KL_SERVER_URL: options.server ?? kld.url, KL_ACTOR: 'cli-tester' },
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Exit 0 and nothing on stderr. */
function ok(args: string[], options?: { input?: string }): string {
  const r = kl(args, options);
  expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
  return r.stdout;
}

/** A failure: the exit code and exactly one readable line on stderr. */
function fails(args: string[], code: 1 | 2, message: RegExp, server?: string): void {
  const r = kl(args, { server });
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

  it('shows a state as instances (table, csv) or as the document (json)', () => {
    const table = ok(['show', state]);
    expect(table).toMatch(/address\s+│ type/);
    expect(table).toContain('module.herd.terraform_data.tag["c"]');
    expect(ok(['show', state, '--serial', '1', '--format', 'csv']).split('\r\n')).toEqual([
      'address,type,provider,status',
      'terraform_data.leader,terraform_data,"provider[""terraform.io/builtin/terraform""]",',
      '"module.herd.terraform_data.tag[""a""]",terraform_data,"provider[""terraform.io/builtin/terraform""]",',
      '"module.herd.terraform_data.tag[""b""]",terraform_data,"provider[""terraform.io/builtin/terraform""]",',
      '',
    ]);
    expect(json(['show', state])).toEqual(v2);
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
      },
    ]);
    const csv = ok(['states', '--format', 'csv']).split('\r\n');
    expect(csv[0]).toBe(
      'name,version,serial,resources,instances,terraform_version,updated_at,locked_by',
    );
    expect(csv[1]).toMatch(new RegExp(`^${state},2,2,2,3,1\\.11\\.4,[^,]+,$`));
  });

  it('lists history', () => {
    const csv = ok(['history', state, '--format', 'csv']).split('\r\n');
    expect(csv[0]).toBe(
      'version,serial,source,actor,terraform_version,resources,instances,created_at',
    );
    expect(csv[1]).toMatch(/^1,1,import,cli-tester,1\.11\.4,2,3,/);
    expect(csv[2]).toMatch(/^2,2,import,cli-tester,1\.11\.4,2,3,/);
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
    const fields = json(['resource', state, address]);
    expect(fields).toContainEqual({
      field: 'attributes.input',
      value: { value: 'uno', type: 'string' },
    });
    expect(fields).toContainEqual({ field: 'dependencies', value: ['terraform_data.leader'] });
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
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(info),
    });
    expect(r.status).toBe(200);
    expect(json(['locks'])).toEqual([
      {
        state,
        lock_id: id,
        who: 'alice@host',
        operation: 'OperationTypeApply',
        acquired_at: expect.any(String),
        acquired_by: 'anonymous',
      },
    ]);
    expect(json(['states'])[0].locked_by).toBe('alice@host');
    // A write without the lock is refused with the server's message.
    fails(['import', path.join(dir, 'v1.tfstate'), '--name', state], 1, /lock/i);
    expect(json(['force-unlock', state])).toEqual([
      { state, released_lock_id: id, held_by: 'alice@host' },
    ]);
    expect(ok(['locks', '--format', 'csv'])).toBe(
      'state,lock_id,who,operation,acquired_at,acquired_by\r\n',
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
    fails(['export', 'no-such-state'], 1, /does not exist/);
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
