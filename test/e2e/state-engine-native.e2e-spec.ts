import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { KL, KldProcess, startKld } from '../support/kld-process';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/**
 * `kl state rm|mv` and `kl rollback resource` on the state-engine lane
 * against a real kld and real terraform (terraform_data only, offline):
 * after each, `terraform state pull` is what the lane committed, `state
 * list` agrees and `plan` is a no-op for the matching configuration; plain
 * terraform is held off while a state-engine write runs and fine after.
 * kl finds the state from the directory's backend "http" block.
 */

jest.setTimeout(240_000);

const TERRAFORM = process.env.KL_TEST_TERRAFORM ?? 'terraform';

let root: string;
let tfEnv: NodeJS.ProcessEnv;
let t: TestDatabase;
let kld: KldProcess;

beforeAll(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-engine-e2e-'));
  const tfrc = path.join(root, 'terraformrc.hcl');
  fs.writeFileSync(tfrc, 'disable_checkpoint = true\n');
  const inherited = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith('TF_') && !k.startsWith('KL_')),
  );
  tfEnv = {
    ...inherited,
    TF_CLI_CONFIG_FILE: tfrc,
    CHECKPOINT_DISABLE: '1',
    TF_IN_AUTOMATION: '1',
    TF_INPUT: '0',
  };
  t = await createTestDatabase('kl_state_engine_native');
  kld = await startKld({ KL_DATABASE_URL: t.url });
});

afterAll(async () => {
  await kld?.stop();
  await t?.drop();
  if (root) fs.rmSync(root, { recursive: true, force: true });
});

// eslint-disable-next-line no-control-regex
const stripAnsi = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, '');

function tf(dir: string, args: string[]) {
  const r = spawnSync(TERRAFORM, args, { cwd: dir, env: tfEnv, encoding: 'utf8', timeout: 90_000 });
  return { code: r.status, out: stripAnsi(`${r.stdout}${r.stderr}`), stdout: r.stdout };
}

function tfOk(dir: string, args: string[], expected = 0) {
  const r = tf(dir, args);
  if (r.code !== expected) {
    throw new Error(`terraform ${args.join(' ')}: exit ${r.code}, expected ${expected}\n${r.out}`);
  }
  return r;
}

function kl(dir: string, args: string[], env: Record<string, string> = {}) {
  const r = spawnSync(process.execPath, [KL, ...args], {
    cwd: dir,
    input: '',
    encoding: 'utf8',
    env: { ...tfEnv, KL_ACTOR: 'operator@ops', ...env },
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

function klOk(dir: string, args: string[]) {
  const r = kl(dir, args);
  expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
  return r.stdout;
}

function klFails(dir: string, args: string[], message: RegExp) {
  const r = kl(dir, args);
  expect(r.code).toBe(1);
  const lines = r.stderr.trimEnd().split('\n');
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(message);
}

function configure(dir: string, name: string, main: string, net = 'net') {
  fs.writeFileSync(
    path.join(dir, 'backend.tf'),
    `terraform {
  backend "http" {
    address        = "${kld.url}/v1/states/${name}"
    lock_address   = "${kld.url}/v1/states/${name}"
    unlock_address = "${kld.url}/v1/states/${name}"
    lock_method    = "LOCK"
    unlock_method  = "UNLOCK"
  }
}
`,
  );
  fs.mkdirSync(path.join(dir, 'modules', 'net'), { recursive: true });
  fs.writeFileSync(
    path.join(dir, 'modules', 'net', 'main.tf'),
    'resource "terraform_data" "x" {\n  input = "x"\n}\n',
  );
  fs.writeFileSync(
    path.join(dir, 'main.tf'),
    `${main}\nmodule "${net}" {\n  source = "./modules/net"\n}\n`,
  );
}

/**
 * One request on a connection of its own: the synchronous terraform and kl
 * runs block the loop long enough for kld to close an idle keep-alive socket.
 */
function request(method: string, route: string, body?: unknown, actor = 'alice') {
  const text = body === undefined ? undefined : JSON.stringify(body);
  const url = new URL(route, kld.url);
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  return new Promise<{ status: number; version: number; json: any }>((resolve, reject) => {
    const req = http.request(
      {
        hostname: url.hostname,
        port: url.port,
        path: url.pathname + url.search,
        method,
        agent: false,
        headers: {
          'X-Kilolock-Actor': actor,
          ...(text === undefined ? {} : { 'Content-Type': 'application/json' }),
        },
      },
      (res) => {
        let answer = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (answer += c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            version: Number(res.headers['x-kilolock-state-version']),
            json: answer === '' ? {} : JSON.parse(answer),
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(text);
  });
}

async function trunk(name: string) {
  const r = await request('GET', `/v1/states/${name}`);
  expect(r.status).toBe(200);
  return { version: r.version, doc: r.json };
}

async function history(name: string) {
  const r = await request('GET', `/v1/api/states/${name}/history`);
  return (
    r.json as { versions: { version: number; serial: number; source: string; actor: string }[] }
  ).versions;
}

/** pull == the lane's document, list agrees, plan is a no-op. */
async function agrees(dir: string, name: string, expected: string[]) {
  const pulled = JSON.parse(tfOk(dir, ['state', 'pull']).stdout);
  expect(pulled).toEqual((await trunk(name)).doc);
  const listed = tfOk(dir, ['state', 'list']).stdout.trim().split('\n').sort();
  expect(listed).toEqual(expected);
  tfOk(dir, ['plan', '-detailed-exitcode', '-lock=false'], 0);
}

const MAIN_B = `resource "terraform_data" "a" {
  input = "a"
}
resource "terraform_data" "b" {
  input = terraform_data.a.output
}
output "a" {
  value = terraform_data.a.output
}`;

describe('native state operations with terraform', () => {
  it('mv (resource, module), rm and rollback: each one state-engine version terraform agrees with', async () => {
    const name = `native/${randomUUID().slice(0, 8)}`;
    const dir = fs.mkdtempSync(path.join(root, 'ops-'));
    configure(dir, name, MAIN_B);
    tfOk(dir, ['init', '-input=false']);
    tfOk(dir, ['apply', '-auto-approve', '-input=false']);
    const applied = await trunk(name);

    // A dry run prints the change and writes nothing.
    const dry = klOk(dir, ['state', 'mv', 'terraform_data.b', 'terraform_data.c', '--dry-run']);
    expect(dry).toContain('~ terraform_data.b -> terraform_data.c');
    expect(dry).toContain('dry run: nothing changed');
    expect((await trunk(name)).version).toBe(applied.version);

    // Refused: the destination exists; nothing written.
    klFails(dir, ['state', 'mv', 'terraform_data.b', 'terraform_data.a'], /never overwrites/);
    expect((await trunk(name)).version).toBe(applied.version);

    // mv a resource: config follows, terraform agrees.
    const mv = klOk(dir, ['state', 'mv', 'terraform_data.b', 'terraform_data.c']);
    expect(mv).toMatch(/state mv: committed version \d+ \(serial \d+\)/);
    configure(dir, name, MAIN_B.replace('"b"', '"c"'));
    await agrees(dir, name, [
      'module.net.terraform_data.x',
      'terraform_data.a',
      'terraform_data.c',
    ]);

    // mv a whole module.
    klOk(dir, ['state', 'mv', 'module.net', 'module.net2']);
    configure(dir, name, MAIN_B.replace('"b"', '"c"'), 'net2');
    tfOk(dir, ['init', '-input=false']);
    await agrees(dir, name, [
      'module.net2.terraform_data.x',
      'terraform_data.a',
      'terraform_data.c',
    ]);

    // rm: the configuration drops it too.
    const beforeRm = (await trunk(name)).doc.serial as number;
    expect(klOk(dir, ['state', 'rm', 'terraform_data.c', '--dry-run'])).toContain(
      '- terraform_data.c',
    );
    klOk(dir, ['state', 'rm', 'terraform_data.c']);
    configure(dir, name, MAIN_B.replace(/resource "terraform_data" "b" \{[^}]*\}/, ''), 'net2');
    await agrees(dir, name, ['module.net2.terraform_data.x', 'terraform_data.a']);

    // rollback: refused for a serial where it did not exist, restores it from one where it did.
    klFails(
      dir,
      ['rollback', 'resource', 'terraform_data.c', '--to-serial', String(applied.doc.serial)],
      /did not exist at serial/,
    );
    const restoring = klOk(dir, [
      'rollback',
      'resource',
      'terraform_data.c',
      '--to-serial',
      String(beforeRm),
    ]);
    expect(restoring).toContain('+ terraform_data.c (as at serial');
    configure(dir, name, MAIN_B.replace('"b"', '"c"'), 'net2');
    await agrees(dir, name, [
      'module.net2.terraform_data.x',
      'terraform_data.a',
      'terraform_data.c',
    ]);

    const versions = await history(name);
    const engine = versions.filter((v) => v.source === 'state-engine');
    // mv, mv, rm, rollback: one version each, by the operator.
    expect(engine).toHaveLength(4);
    expect(engine.every((v) => v.actor === 'operator@ops')).toBe(true);
    // Each as its own state-engine run, recorded with what it did.
    const listed = (await request('GET', `/v1/api/apply-runs?state=${name}`)).json as {
      runs: { run_id: string }[];
    };
    const runs: { lane: string; status: string; info: { state_engine_operation: string } }[] = [];
    for (const { run_id } of listed.runs) {
      runs.push((await request('GET', `/v1/api/apply-runs/${run_id}`)).json as (typeof runs)[0]);
    }
    expect(runs.map((r) => [r.lane, r.status, r.info.state_engine_operation]).reverse()).toEqual([
      ['state-engine', 'committed', 'state mv'],
      ['state-engine', 'committed', 'state mv'],
      ['state-engine', 'committed', 'state rm'],
      ['state-engine', 'committed', 'rollback resource'],
    ]);
  });

  it('plain terraform apply is refused while a state-engine write runs, and succeeds after', async () => {
    const name = `native/${randomUUID().slice(0, 8)}`;
    const dir = fs.mkdtempSync(path.join(root, 'lock-'));
    configure(dir, name, MAIN_B);
    tfOk(dir, ['init', '-input=false']);
    tfOk(dir, ['apply', '-auto-approve', '-input=false']);
    const { version } = await trunk(name);
    const started = await request(
      'POST',
      `/v1/engine/states/${name}/runs`,
      { operation: 'state rm', base_version: version, write: ['terraform_data.b'] },
      'eve@ops',
    );
    expect(started.status).toBe(201);
    const runId = started.json.run_id as string;

    fs.writeFileSync(
      path.join(dir, 'more.tf'),
      'resource "terraform_data" "d" {\n  input = "d"\n}\n',
    );
    const refused = tf(dir, ['apply', '-auto-approve', '-input=false', '-lock-timeout=0s']);
    expect(refused.code).not.toBe(0);
    // Terraform prints the holder's ID: the state-engine run (its LockInfo names the
    // operation and who: state-engine-api.e2e-spec.ts).
    expect(refused.out).toContain(`ID=${runId}`);
    expect((await trunk(name)).version).toBe(version);

    const finished = await request('POST', `/v1/engine/states/${name}/runs/${runId}/finish`, {
      status: 'aborted',
    });
    expect(finished.status).toBe(200);
    tfOk(dir, ['apply', '-auto-approve', '-input=false']);
    expect(tfOk(dir, ['state', 'list']).stdout).toContain('terraform_data.d');
  });

  it('kl config: flags over env over .kl.toml over the backend block, each with its source', () => {
    const dir = fs.mkdtempSync(path.join(root, 'config-'));
    configure(dir, 'cfg/backend', MAIN_B);
    const fromBackend = klOk(dir, ['config']);
    expect(fromBackend).toMatch(/state\s+cfg\/backend\s+backend "http" \(backend.tf\)/);
    expect(fromBackend).toMatch(/protocol\s+auto\s+default/);
    fs.writeFileSync(
      path.join(dir, '.kl.toml'),
      `state_url = "${kld.url}/v1/states/cfg/toml"\nprotocol = "http"\n[auth]\ntoken_env = "MY_TOKEN"\n`,
    );
    const fromToml = kl(dir, ['config'], { MY_TOKEN: 'sekret' });
    expect(fromToml.stdout).toMatch(/state\s+cfg\/toml\s+\.kl\.toml/);
    expect(fromToml.stdout).toMatch(/token\s+\(set\)\s+\.kl\.toml/);
    expect(fromToml.stdout).not.toContain('sekret');
    const fromEnv = kl(dir, ['config'], {
      MY_TOKEN: 'x',
      KL_STATE_URL: `${kld.url}/v1/states/cfg/env`,
      KL_PROTOCOL: 'state-engine',
    });
    expect(fromEnv.stdout).toMatch(/state\s+cfg\/env\s+env \(KL_STATE_URL\)/);
    expect(fromEnv.stdout).toMatch(/protocol\s+state-engine\s+env \(KL_PROTOCOL\)/);
    const fromFlag = kl(
      dir,
      ['config', '--protocol', 'auto', '--state-url', `${kld.url}/v1/states/cfg/flag`],
      {
        MY_TOKEN: 'x',
        KL_STATE_URL: `${kld.url}/v1/states/cfg/env`,
        KL_PROTOCOL: 'state-engine',
      },
    );
    expect(fromFlag.stdout).toMatch(/state\s+cfg\/flag\s+flag/);
    expect(fromFlag.stdout).toMatch(/protocol\s+auto\s+flag/);
    klFails(dir, ['config'], /auth.token_env names MY_TOKEN, which is not set/);
  });
});
