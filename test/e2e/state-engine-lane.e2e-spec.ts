import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { KL, KldProcess, startKld } from '../support/kld-process';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/**
 * `kl plan -f` / `kl apply` on the state-engine lane (ADR 0029 D8) against a
 * real kld and real terraform (terraform_data and local-exec only: offline).
 * A provable scope runs on the trusted lane: the server's slice, a
 * state-engine run that terraform sees as a lock, a delta commit with
 * source state-engine; an unprovable one falls back to the full-trunk lane
 * for real. After each, `terraform state pull` is the trunk and `plan` a
 * no-op; `kl history` and the runs say which lane wrote what.
 */

jest.setTimeout(300_000);

const TERRAFORM = process.env.KL_TEST_TERRAFORM ?? 'terraform';
const ACTOR = 'dana@ops';

let root: string;
let tfEnv: NodeJS.ProcessEnv;
let t: TestDatabase;
let kld: KldProcess;
const running = new Set<ChildProcess>();

beforeAll(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-engine-lane-'));
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
  t = await createTestDatabase('kl_state_engine_lane');
  kld = await startKld({ KL_DATABASE_URL: t.url });
});

afterAll(async () => {
  for (const child of running) child.kill('SIGKILL');
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

interface KlRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** kl, asynchronously (kld answers while it runs); `onOutput` sees the output so far. */
function kl(
  dir: string,
  args: string[],
  env: Record<string, string> = {},
  onOutput?: (output: string) => void,
): Promise<KlRun> {
  const child = spawn(process.execPath, [KL, ...args], {
    cwd: dir,
    env: { ...tfEnv, KL_ACTOR: ACTOR, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (c: Buffer) => {
    stdout += c.toString();
    onOutput?.(stdout + stderr);
  });
  child.stderr!.on('data', (c: Buffer) => {
    stderr += c.toString();
    onOutput?.(stdout + stderr);
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), 150_000);
  return new Promise((resolve) =>
    child.on('close', (code) => {
      clearTimeout(timer);
      running.delete(child);
      resolve({ code, stdout, stderr });
    }),
  );
}

async function klOk(dir: string, args: string[], env: Record<string, string> = {}) {
  const r = await kl(dir, args, env);
  if (r.code !== 0) {
    throw new Error(
      `kl ${args.join(' ')}: exit ${r.code}\n${r.stdout}${r.stderr}\n--- kld ---\n${kld.output().slice(-2000)}`,
    );
  }
  return r.stdout;
}

/** One request on a connection of its own. */
function request(method: string, url: string, body?: unknown) {
  const text = body === undefined ? undefined : JSON.stringify(body);
  const u = new URL(url);
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  return new Promise<{ status: number; version: number; json: any }>((resolve, reject) => {
    const req = http.request(
      {
        hostname: u.hostname,
        port: u.port,
        path: u.pathname + u.search,
        method,
        agent: false,
        headers: {
          'X-Kilolock-Actor': 'terraform@ci',
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
  const r = await request('GET', `${kld.url}/v1/states/${name}`);
  expect(r.status).toBe(200);
  return { version: r.version, doc: r.json };
}

async function history(name: string) {
  const r = await request('GET', `${kld.url}/v1/api/states/${name}/history`);
  return (r.json as { versions: { version: number; source: string; actor: string }[] }).versions;
}

/** The state's runs, newest first, each whole (its info) from the run's own route. */
async function runs(name: string) {
  const r = await request('GET', `${kld.url}/v1/api/apply-runs?state=${name}`);
  const listed = (r.json as { runs: { run_id: string }[] }).runs;
  return Promise.all(
    listed.map(async ({ run_id }) => {
      const run = await request('GET', `${kld.url}/v1/api/apply-runs/${run_id}`);
      return run.json as {
        run_id: string;
        lane: string;
        status: string;
        actor: string;
        committed_version: number | null;
        info: Record<string, unknown>;
      };
    }),
  );
}

/** pull == the trunk, and plan is a no-op. */
async function agrees(dir: string, name: string) {
  const pulled = JSON.parse(tfOk(dir, ['state', 'pull']).stdout);
  expect(pulled).toEqual((await trunk(name)).doc);
  tfOk(dir, ['plan', '-detailed-exitcode', '-lock=false', '-input=false'], 0);
}

function write(dir: string, file: string, text: string) {
  fs.writeFileSync(path.join(dir, file), text);
}

const BASE = 'resource "terraform_data" "base" {\n  input = "base"\n}\n';
const app = (v: string, support = false) =>
  `resource "terraform_data" "app" {\n  input = "app-${v}:\${terraform_data.base.output}${support ? ':${terraform_data.support.output}' : ''}"\n}\n`;
const SUPPORT = 'resource "terraform_data" "support" {\n  input = "support"\n}\n';
const GATE = `variable "gate_version" {
  type    = string
  default = "g0"
}
variable "gate_file" {
  type    = string
  default = ""
}
# Replacing it waits (at most 120 s) until the test creates gate_file.
resource "terraform_data" "gate" {
  input            = var.gate_version
  triggers_replace = [var.gate_version]
  provisioner "local-exec" {
    command = var.gate_file == "" ? "true" : "i=0; while [ ! -e '\${var.gate_file}' ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done; [ -e '\${var.gate_file}' ]"
  }
}
`;

/** A terraform directory on kld, applied by plain terraform: base, app, gate. */
function fixture(name: string): string {
  const dir = fs.mkdtempSync(path.join(root, 'lane-'));
  write(
    dir,
    'backend.tf',
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
  write(dir, 'base.tf', BASE);
  write(dir, 'app.tf', app('v1'));
  write(dir, 'gate.tf', GATE);
  fs.mkdirSync(path.join(dir, 'modules', 'one'), { recursive: true });
  write(dir, 'modules/one/main.tf', 'resource "terraform_data" "x" {\n  input = "x"\n}\n');
  tfOk(dir, ['init', '-input=false']);
  tfOk(dir, ['apply', '-auto-approve', '-input=false']);
  return dir;
}

function planFile(dir: string, file: string) {
  return JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8'));
}

describe('kl plan / kl apply on the state-engine lane', () => {
  it('a provable scope (with an undeployed support node) plans on the slice and applies on the trusted lane', async () => {
    const name = `lane/${randomUUID().slice(0, 8)}`;
    const dir = fixture(name);
    const before = await trunk(name);
    const instances = before.doc.resources.length;

    // app.tf now needs a support node in a file of its own, never deployed.
    write(dir, 'app.tf', app('v2', true));
    write(dir, 'support.tf', SUPPORT);
    // protocol auto (the default): kld offers the lane, so kl asks it.
    const planned = await klOk(dir, ['plan', '-f', 'app.tf', '-o', 'trusted.json']);
    expect(planned).toContain('Scope expansion: provably safe');
    expect(planned).toMatch(/undeployed\s+terraform_data\.support \(never in this state/);
    expect(planned).toMatch(/slice: 2 of 3 instances, [\d.]+ (B|KiB) fetched/);
    expect(planned).toContain('Lane: state-engine (trusted');
    expect(planned).toContain('protocol auto: the server proved the scope safe');
    const plan = planFile(dir, 'trusted.json');
    expect(plan).toMatchObject({ lane: 'state-engine', base_version: before.version });
    // What it changes (the undeployed node too) for write; the rest of the scope, which it
    // only reads (base, a support block from another file), for read.
    expect(plan.reservations.write).toEqual(
      expect.arrayContaining(['terraform_data.app', 'terraform_data.support']),
    );
    expect(plan.reservations.write).not.toContain('terraform_data.base');
    expect(plan.reservations.read).toContain('terraform_data.base');
    expect(instances).toBe(3);

    const applied = await klOk(dir, ['apply', 'trusted.json']);
    expect(applied).toContain('lane state-engine (trusted)');
    expect(applied).toContain('terraform sees the state locked by a state-engine apply');
    expect(applied).toMatch(/\(source=state-engine, run=[0-9a-f-]{36}, lane=state-engine\)/);
    await agrees(dir, name);
    expect(tfOk(dir, ['state', 'list']).stdout).toContain('terraform_data.support');

    const head = (await history(name)).at(-1)!;
    expect(head).toMatchObject({ source: 'state-engine', actor: ACTOR });
    // kl history says the same.
    const listed = JSON.parse(
      await klOk(dir, ['--server', kld.url, '--format', 'json', 'history', name]),
    ) as { version: number; source: string; actor: string }[];
    expect(listed.at(-1)).toMatchObject({
      version: head.version,
      source: 'state-engine',
      actor: ACTOR,
    });
    const [run] = await runs(name);
    expect(run).toMatchObject({
      lane: 'state-engine',
      status: 'committed',
      actor: ACTOR,
      committed_version: head.version,
      info: expect.objectContaining({ state_engine_operation: 'apply' }),
    });
    expect(await klOk(dir, ['--server', kld.url, 'runs', name, '--format', 'json'])).toContain(
      '"state-engine"',
    );
  });

  it('holds the coarse lock while it applies: terraform LOCK gets 423 naming the state-engine apply', async () => {
    const name = `lane/${randomUUID().slice(0, 8)}`;
    const dir = fixture(name);
    const gate = path.join(root, `gate-${randomUUID()}`);
    write(dir, 'gate.auto.tfvars', `gate_version = "g1"\ngate_file = ${JSON.stringify(gate)}\n`);
    await klOk(dir, ['plan', '-f', 'gate.tf', '-o', 'gate.json'], { KL_PROTOCOL: 'state-engine' });
    expect(planFile(dir, 'gate.json').lane).toBe('state-engine');

    let seen: () => void = () => undefined;
    const creating = new Promise<void>((resolve) => (seen = resolve));
    const applying = kl(dir, ['apply', 'gate.json'], {}, (out) => {
      if (/terraform_data\.gate: Creating/.test(out)) seen();
    });
    await creating;
    const [run] = await runs(name);
    const lock = await request('LOCK', `${kld.url}/v1/states/${name}`, {
      ID: randomUUID(),
      Operation: 'OperationTypeApply',
      Info: '',
      Who: 'terraform@ci',
      Version: '1.11.4',
      Created: new Date().toISOString(),
      Path: '',
    });
    expect(lock.status).toBe(423);
    expect(lock.json).toMatchObject({
      ID: run.run_id,
      Operation: 'state-engine: apply',
      Who: ACTOR,
    });
    // And terraform itself says so.
    const refused = tf(dir, ['plan', '-lock-timeout=0s', '-input=false']);
    expect(refused.code).not.toBe(0);
    expect(refused.out).toContain(`ID=${run.run_id}`);

    fs.writeFileSync(gate, '');
    const done = await applying;
    expect({ code: done.code, stderr: done.stderr }).toEqual({ code: 0, stderr: '' });
    expect(done.stdout).toMatch(/\(source=state-engine, run=[0-9a-f-]{36}, lane=state-engine\)/);
    // Released with the commit: terraform works again, and agrees.
    await agrees(dir, name);
  });

  it('an unprovable scope falls back for real: full trunk, no state-engine lock, the run records lane full', async () => {
    const name = `lane/${randomUUID().slice(0, 8)}`;
    const dir = fixture(name);
    // A module call this state never had: the server cannot tell it from a typo.
    write(dir, 'fresh.tf', 'module "fresh" {\n  source = "./modules/one"\n}\n');
    tfOk(dir, ['init', '-input=false']);
    const planned = await klOk(dir, ['plan', '-f', 'fresh.tf', '-o', 'fresh.json'], {
      KL_PROTOCOL: 'state-engine',
    });
    expect(planned).toContain('Scope expansion: NOT provably safe');
    expect(planned).toMatch(/unknown\s+module\.fresh/);
    expect(planned).toContain('Lane: full');
    expect(planned).toMatch(/cannot prove the scope safe \(.*module\.fresh.*\), so kl falls back/);
    expect(planFile(dir, 'fresh.json')).toMatchObject({ lane: 'full', scope: { slice: null } });

    const applied = await klOk(dir, ['apply', 'fresh.json']);
    expect(applied).toContain('lane full: the full trunk, no state-engine coarse lock');
    expect(applied).toMatch(/\(source=apply, run=[0-9a-f-]{36}, lane=full\)/);
    await agrees(dir, name);
    expect((await history(name)).at(-1)).toMatchObject({ source: 'apply', actor: ACTOR });
    expect((await runs(name))[0]).toMatchObject({ lane: 'full', status: 'committed' });
    expect((await runs(name))[0].info.state_engine_operation).toBeUndefined();
  });

  it('a stale plan or delta commit on the trusted lane is refused and writes nothing', async () => {
    const name = `lane/${randomUUID().slice(0, 8)}`;
    const dir = fixture(name);
    write(dir, 'app.tf', app('v3'));
    await klOk(dir, ['plan', '-f', 'app.tf', '-o', 'stale.json']);
    expect(planFile(dir, 'stale.json').lane).toBe('state-engine');
    // Plain terraform changes the planned address meanwhile.
    write(dir, 'app.tf', app('v4'));
    tfOk(dir, ['apply', '-auto-approve', '-input=false']);
    const { version } = await trunk(name);
    const refused = await kl(dir, ['apply', 'stale.json']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/the plan is stale: terraform_data\.app changed in version/);
    expect((await trunk(name)).version).toBe(version);

    // A delta commit on a base older than a change to what it touches: 409, nothing stored.
    const started = await request('POST', `${kld.url}/v1/engine/states/${name}/runs`, {
      operation: 'apply',
      base_version: version,
      write: ['terraform_data.app'],
    });
    expect(started.status).toBe(201);
    const commit = await request(
      'POST',
      `${kld.url}/v1/engine/states/${name}/runs/${started.json.run_id}/commit`,
      { base_version: 1, terraform_version: '1.11.4', deletes: ['terraform_data.app'] },
    );
    expect(commit.status).toBe(409);
    expect(commit.json.error.code).toBe('APPLY.STALE');
    expect((await trunk(name)).version).toBe(version);
    await request(
      'POST',
      `${kld.url}/v1/engine/states/${name}/runs/${started.json.run_id}/finish`,
      {
        status: 'conflict',
      },
    );
    await agrees(dir, name);
  });

  it('auto follows the server metadata; http never asks; state-engine without the lane is refused', async () => {
    const name = `lane/${randomUUID().slice(0, 8)}`;
    const dir = fixture(name);
    write(dir, 'app.tf', app('v5'));

    // A kld without the lane (older, or behind a proxy that hides it): /v1/engine is 404.
    const engineHits: string[] = [];
    const proxy = http.createServer((req, res) => {
      if (req.url!.startsWith('/v1/engine')) {
        engineHits.push(req.url!);
        res.writeHead(404, { 'Content-Type': 'application/json' });
        res.end('{"error":{"code":"ROUTE.NOT_FOUND","message":"no such route"}}');
        return;
      }
      const target = new URL(kld.url);
      const upstream = http.request(
        {
          hostname: target.hostname,
          port: target.port,
          path: req.url,
          method: req.method,
          headers: req.headers,
        },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      req.pipe(upstream);
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    try {
      const viaProxy = ['--server', proxyUrl, 'plan', '-f', 'app.tf', '--state', name];
      const auto = await klOk(dir, [...viaProxy, '-o', 'auto.json']);
      expect(auto).toContain('protocol auto: the server offers no state-engine lane');
      expect(planFile(dir, 'auto.json')).toMatchObject({ lane: 'full', scope: null });
      expect(engineHits).toEqual(['/v1/engine']);

      const refused = await kl(dir, [...viaProxy, '-o', 'se.json'], {
        KL_PROTOCOL: 'state-engine',
      });
      expect(refused.code).toBe(3);
      expect(refused.stderr).toMatch(
        /protocol state-engine, but the server offers no state-engine lane/,
      );
      expect(fs.existsSync(path.join(dir, 'se.json'))).toBe(false);
    } finally {
      await new Promise((resolve) => proxy.close(resolve));
    }

    // auto against kld itself: the lane; http: never asked, whatever the server offers.
    expect(planFile(dir, 'auto.json').lane).toBe('full');
    await klOk(dir, ['plan', '-f', 'app.tf', '-o', 'auto2.json']);
    expect(planFile(dir, 'auto2.json').lane).toBe('state-engine');
    write(dir, '.kl.toml', 'protocol = "http"\n');
    const viaToml = await klOk(dir, ['plan', '-f', 'app.tf', '-o', 'http.json']);
    expect(viaToml).not.toContain('Scope expansion');
    expect(planFile(dir, 'http.json')).toMatchObject({
      lane: 'full',
      lane_reasons: ['protocol http: the full-trunk lane'],
      scope: null,
    });
    // The flag wins over .kl.toml.
    await klOk(dir, ['--protocol', 'auto', 'plan', '-f', 'app.tf', '-o', 'flag.json']);
    expect(planFile(dir, 'flag.json').lane).toBe('state-engine');
  });
});
