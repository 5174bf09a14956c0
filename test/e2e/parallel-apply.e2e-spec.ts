import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { KL, KldProcess, ROOT, startKld } from '../support/kld-process';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/**
 * `kl plan` / `kl apply` (ADR 0007, revised model) with the real terraform
 * 1.11 against one `kld`, on the examples/parallel-apply configuration
 * (terraform_data and local-exec only: offline). Each slow resource sleeps
 * SLEEP seconds while it is replaced; where a test needs an apply to be
 * still running while something else happens, it applies terraform_data.gate,
 * whose creation waits until the test opens its gate (a file).
 */

jest.setTimeout(180_000);

const TERRAFORM = process.env.KL_TEST_TERRAFORM ?? 'terraform';
const STATE = 'e2e/parallel';
const SLEEP = 3;
const COMMAND_TIMEOUT_MS = 120_000;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  startedAt: number;
  endedAt: number;
}

interface Running {
  child: ChildProcess;
  done: Promise<Run>;
  /** Resolves once stdout or stderr matched. */
  seen(pattern: RegExp, timeoutMs?: number): Promise<void>;
  output(): string;
}

let root: string;
let dir: string;
let env: NodeJS.ProcessEnv;
let t: TestDatabase;
let kld: KldProcess;
const running = new Set<ChildProcess>();

function start(
  command: string,
  args: string[],
  options: { detached?: boolean; cwd?: string } = {},
): Running {
  const startedAt = Date.now();
  const child = spawn(command, args, {
    cwd: options.cwd ?? dir,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: options.detached,
  });
  running.add(child);
  let stdout = '';
  let stderr = '';
  const waiters: { pattern: RegExp; resolve: () => void }[] = [];
  const check = () => {
    for (const w of [...waiters]) {
      if (w.pattern.test(stdout) || w.pattern.test(stderr)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
    }
  };
  child.stdout!.on('data', (c: Buffer) => {
    stdout += c.toString();
    check();
  });
  child.stderr!.on('data', (c: Buffer) => {
    stderr += c.toString();
    check();
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), COMMAND_TIMEOUT_MS);
  const done = new Promise<Run>((resolve) => {
    child.on('close', (code) => {
      clearTimeout(timer);
      running.delete(child);
      resolve({ code, stdout, stderr, startedAt, endedAt: Date.now() });
    });
  });
  return {
    child,
    done,
    output: () => stdout + stderr,
    seen: (pattern, timeoutMs = 60_000) =>
      new Promise<void>((resolve, reject) => {
        const timeout = setTimeout(
          () => reject(new Error(`never saw ${pattern}; output so far:\n${stdout}${stderr}`)),
          timeoutMs,
        );
        waiters.push({
          pattern,
          resolve: () => {
            clearTimeout(timeout);
            resolve();
          },
        });
        check();
        void done.then(() => {
          if (!pattern.test(stdout + stderr)) {
            clearTimeout(timeout);
            reject(new Error(`exited without ${pattern}:\n${stdout}${stderr}`));
          }
        });
      }),
  };
}

const kl = (...args: string[]) => start(process.execPath, [KL, ...args]);
const tf = (...args: string[]) => start(TERRAFORM, args);

async function ok(r: Running, expected = 0): Promise<Run> {
  const run = await r.done;
  if (run.code !== expected) {
    throw new Error(
      `exit ${run.code}, expected ${expected}\n${run.stdout}${run.stderr}\n--- kld ---\n${kld.output().slice(-2000)}`,
    );
  }
  return run;
}

/** A variable value kept in the directory, as the demo does, so plain terraform agrees. */
function setVar(name: string, value: string | number | boolean): void {
  fs.writeFileSync(path.join(dir, `${name}.auto.tfvars`), `${name} = ${JSON.stringify(value)}\n`);
}

let counter = 0;
const fresh = () => `v${Date.now()}-${++counter}`;

/** `kl plan -f <file>` with new values, saved as `<out>`. */
async function plan(file: string, out: string, vars: Record<string, string | boolean>) {
  for (const [k, v] of Object.entries(vars)) setVar(k, v);
  return ok(kl('plan', '-f', file, '-o', out));
}

async function versions(): Promise<{ version: number; source: string; actor: string }[]> {
  return t.db.query(
    `SELECT v.version, v.source, v.actor FROM state_versions v JOIN states s ON s.state_id = v.state_id
      WHERE s.name = $1 ORDER BY v.version`,
    [STATE],
  );
}

async function document(): Promise<{
  text: string;
  doc: { outputs: Record<string, { value: unknown }> };
}> {
  const r = await fetch(`${kld.url}/v1/states/${STATE}`);
  const text = await r.text();
  return { text, doc: JSON.parse(text) };
}

async function instanceInput(address: string): Promise<unknown> {
  const rows = await t.db.query<{ input: unknown }>(
    `SELECT attributes->'input'->'value' AS input FROM current_resources WHERE state_name = $1 AND address = $2`,
    [STATE, address],
  );
  return rows[0]?.input;
}

let gates = 0;

/**
 * A file that terraform_data.gate's creation waits for: an apply of the gate
 * holds its reservations (or its lock) until the test opens it, so what
 * happens meanwhile does not depend on how fast this machine is.
 */
function gate(): { file: string; open(): void } {
  const file = path.join(root, `gate-${++gates}`);
  return { file, open: () => fs.writeFileSync(file, '') };
}

/** What the remote_state server in the plans test answers: an empty state. */
const EMPTY_STATE = JSON.stringify({
  version: 4,
  terraform_version: '1.11.4',
  serial: 1,
  lineage: 'b3d1c0de-0000-4000-8000-000000000001',
  outputs: {},
  resources: [],
});

const runIdOf = (out: string) => /run ([0-9a-f-]{36})/.exec(out)?.[1];

beforeAll(async () => {
  const version = spawnSync(TERRAFORM, ['version'], { encoding: 'utf8' });
  if (version.status !== 0) throw new Error(`terraform is required: ${version.stderr}`);
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-parallel-e2e-'));
  dir = path.join(root, 'cfg');
  const example = path.join(ROOT, 'examples', 'parallel-apply');
  fs.cpSync(example, dir, {
    recursive: true,
    filter: (src) => {
      const name = path.basename(src);
      return !/\.sh$|\.md$|^backend\.tf$|^\.terraform|tfvars$|kl-plan\.json$|tfstate$/.test(name);
    },
  });
  const tfrc = path.join(root, 'terraformrc');
  fs.writeFileSync(tfrc, 'disable_checkpoint = true\n');
  const tmp = path.join(root, 'tmp');
  fs.mkdirSync(tmp);
  env = {
    ...Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !k.startsWith('TF_') && !k.startsWith('KL_')),
    ),
    TF_CLI_CONFIG_FILE: tfrc,
    CHECKPOINT_DISABLE: '1',
    TF_IN_AUTOMATION: '1',
    TF_INPUT: '0',
    KL_TERRAFORM: TERRAFORM,
    // kl's private directories live here: those of the kl processes this spec kills with
    // SIGKILL (which cannot clean up) go with root.
    TMPDIR: tmp,
    // The full-trunk lane of issue 11; state-engine-lane.e2e-spec.ts runs the trusted lane.
    KL_PROTOCOL: 'http',
  };
  t = await createTestDatabase('kl_parallel');
  kld = await startKld({ KL_DATABASE_URL: t.url });
  const address = `${kld.url}/v1/states/${STATE}`;
  fs.writeFileSync(
    path.join(dir, 'backend.tf'),
    `terraform {\n  backend "http" {\n    address        = "${address}"\n    lock_address   = "${address}"\n    unlock_address = "${address}"\n    lock_method    = "LOCK"\n    unlock_method  = "UNLOCK"\n  }\n}\n`,
  );
  fs.writeFileSync(
    path.join(dir, 'flaky.tf'),
    [
      'variable "flaky_version" {',
      '  type    = string',
      '  default = "v1"',
      '}',
      'variable "flaky_fail" {',
      '  type    = bool',
      '  default = false',
      '}',
      'resource "terraform_data" "flaky" {',
      '  input            = var.flaky_version',
      '  triggers_replace = [var.flaky_version]',
      '  provisioner "local-exec" {',
      '    command = var.flaky_fail ? "echo flaky broke >&2; exit 3" : "true"',
      '  }',
      '}',
      '',
    ].join('\n'),
  );
  fs.writeFileSync(
    path.join(dir, 'gate.tf'),
    [
      'variable "gate_version" {',
      '  type    = string',
      '  default = "v1"',
      '}',
      'variable "gate_file" {',
      '  type    = string',
      '  default = ""',
      '}',
      '# Creating it waits (at most 120 s) until the test creates gate_file.',
      'resource "terraform_data" "gate" {',
      '  input            = var.gate_version',
      '  triggers_replace = [var.gate_version]',
      '  provisioner "local-exec" {',
      `    command = var.gate_file == "" ? "true" : "i=0; while [ ! -e '\${var.gate_file}' ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done; [ -e '\${var.gate_file}' ]"`,
      '  }',
      '}',
      '',
    ].join('\n'),
  );
  setVar('sleep_seconds', SLEEP);
  await ok(tf('init', '-input=false', '-no-color'));
  await ok(tf('apply', '-auto-approve', '-input=false', '-no-color'));
});

afterAll(async () => {
  for (const child of running) {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      child.kill('SIGKILL');
    }
  }
  await kld?.stop();
  await t?.drop();
  if (root) fs.rmSync(root, { recursive: true, force: true });
});

it('kl plan in an initialised directory needs no flags and predicts the reservations', async () => {
  const run = await plan('slow_a.tf', 'a.json', { slow_a_version: fresh() });
  expect(run.stdout).toContain(`kl plan of ${STATE} at version 1`);
  expect(run.stdout).toMatch(/-\/\+ terraform_data\.slow_a \(replace\)/);
  expect(run.stdout).toContain('Plan: 0 to create, 0 to update, 1 to replace, 0 to delete.');
  expect(run.stdout).toContain('write terraform_data.slow_a');
  const file = JSON.parse(fs.readFileSync(path.join(dir, 'a.json'), 'utf8'));
  expect(file).toMatchObject({
    state: STATE,
    server: kld.url,
    base_version: 1,
    write_set: ['terraform_data.slow_a'],
    read_set: [],
    footprint: ['terraform_data.slow_a'],
    reservations: { write: ['terraform_data.slow_a', 'output.slow_a'], read: [] },
  });
  expect(fs.statSync(path.join(dir, 'a.json')).mode & 0o077).toBe(0);
  // Nothing was written by planning.
  expect(await versions()).toHaveLength(1);
});

it('two disjoint kl apply at once both commit, in overlapping windows', async () => {
  const g = gate();
  const a = fresh();
  const b = fresh();
  await plan('gate.tf', 'a.json', { gate_version: a, gate_file: g.file });
  await plan('slow_b.tf', 'b.json', { slow_b_version: b });
  const before = (await versions()).length;
  const first = kl('apply', 'a.json', '--actor', 'alice');
  await first.seen(/terraform_data\.gate: Creating/);
  // bob applies his part from start to commit while alice's terraform is still running.
  const rb = await ok(kl('apply', 'b.json', '--actor', 'bob'));
  expect(first.child.exitCode).toBeNull();
  g.open();
  const ra = await ok(first);
  expect(ra.stdout).toMatch(/committed version \d+ at serial \d+ \(source=apply, run=/);
  expect(rb.stdout).toMatch(/committed version \d+ at serial \d+ \(source=apply, run=/);

  const runs = await t.db.query<{
    actor: string;
    started_at: Date;
    finished_at: Date;
    status: string;
  }>(
    `SELECT r.actor, r.status, r.started_at, r.finished_at FROM apply_runs r
      WHERE r.run_id = ANY($1::text[]) ORDER BY r.actor`,
    [[runIdOf(ra.stdout), runIdOf(rb.stdout)]],
  );
  expect(runs.map((r) => [r.actor, r.status])).toEqual([
    ['alice', 'committed'],
    ['bob', 'committed'],
  ]);
  // bob's run lies inside alice's.
  const [alice, bob] = runs;
  expect(alice.started_at.getTime()).toBeLessThan(bob.started_at.getTime());
  expect(bob.finished_at.getTime()).toBeLessThan(alice.finished_at.getTime());

  expect((await versions()).length).toBe(before + 2);
  expect(await instanceInput('terraform_data.gate')).toBe(a);
  expect(await instanceInput('terraform_data.slow_b')).toBe(`kl-demo-b-${b}`);
  const { doc } = await document();
  expect(doc.outputs.slow_b.value).toBe(`kl-demo-b-${b}`);
});

it('a second apply of the same address exits 2 naming the holder; plain terraform is refused; --wait then asks to re-plan', async () => {
  const g = gate();
  await plan('gate.tf', 'first.json', { gate_version: fresh(), gate_file: g.file });
  await plan('gate.tf', 'second.json', { gate_version: fresh() });
  const first = kl('apply', 'first.json', '--actor', 'alice');
  await first.seen(/terraform_data\.gate: Creating/);
  const holder = runIdOf(first.output())!;

  const [refused, plain] = await Promise.all([
    ok(kl('apply', 'second.json', '--actor', 'bob'), 2),
    ok(
      tf('apply', '-auto-approve', '-input=false', '-no-color', '-target=terraform_data.slow_b'),
      1,
    ),
  ]);
  expect(refused.stderr).toContain('reservation conflict on terraform_data.gate:');
  expect(refused.stderr).toMatch(
    new RegExp(`held by alice \\(run ${holder}, acquired \\d+s ago, expires in \\d+m\\d+s\\)`),
  );

  expect(plain.stderr).toContain('Error acquiring the state lock');
  // terraform prints only the holder's ID from the LockInfo kld answers with.
  expect(plain.stderr).toMatch(new RegExp(`HTTP remote state already locked:\\s+ID=${holder}`));

  const waiting = kl('apply', 'second.json', '--actor', 'bob', '--wait', '60s');
  await waiting.seen(/waiting \d+s: terraform_data\.gate held by alice/);
  g.open();
  await ok(first);
  const waited = await ok(waiting, 2);
  expect(waited.stderr).toMatch(
    /the plan is stale: terraform_data\.gate changed in version \d+ .*re-plan/,
  );

  // Re-planned, it goes through.
  const again = await plan('gate.tf', 'second.json', {});
  expect(again.stdout).toContain('terraform_data.gate (replace)');
  await ok(kl('apply', 'second.json', '--actor', 'bob'));
});

it('kl apply during a plain terraform apply exits 2 naming the Terraform lock, and with --wait commits after it', async () => {
  await plan('slow_a.tf', 'c.json', { slow_a_version: fresh() });
  const g = gate();
  setVar('gate_version', fresh());
  setVar('gate_file', g.file);
  const plain = tf(
    'apply',
    '-auto-approve',
    '-input=false',
    '-no-color',
    '-target=terraform_data.gate',
  );
  await plain.seen(/terraform_data\.gate: Creating/);
  // Both start while terraform holds its lock: one gives up, one waits.
  const waiting = kl('apply', 'c.json', '--actor', 'carol', '--wait', '60s');
  const refused = await ok(kl('apply', 'c.json', '--actor', 'carol'), 2);
  expect(refused.stderr).toMatch(
    /reservation conflict on \*:\n {2}held by a Terraform lock of \S+ \(lock [0-9a-f-]{36}, OperationTypeApply, acquired \d+s ago\)/,
  );
  await waiting.seen(/waiting \d+s: \* held by a Terraform lock/);

  g.open();
  await ok(plain);
  const committed = await ok(waiting);
  expect(committed.stdout).toContain('committed version');
});

it('refuses a stale plan before anything runs', async () => {
  const one = fresh();
  await plan('slow_b.tf', 'p1.json', { slow_b_version: one });
  await plan('slow_b.tf', 'p2.json', { slow_b_version: fresh() });
  await ok(kl('apply', 'p1.json', '--actor', 'dave'));
  const count = (await versions()).length;
  const stale = await ok(kl('apply', 'p2.json', '--actor', 'dave'), 2);
  expect(stale.stderr).toMatch(
    /the plan is stale: terraform_data\.slow_b changed in version \d+ \(plan base version \d+\): re-plan/,
  );
  expect(stale.stdout).not.toContain('apply running');
  expect((await versions()).length).toBe(count);
  setVar('slow_b_version', one);
});

it('fails loud and commits nothing when terraform would write outside the planned write set', async () => {
  const before = fs.readFileSync(path.join(dir, 'slow_a.tf'), 'utf8');
  await plan('slow_a.tf', 'h.json', { slow_a_version: fresh() });
  fs.appendFileSync(
    path.join(dir, 'slow_a.tf'),
    '\nresource "terraform_data" "sneaky" {\n  input = "x"\n}\n',
  );
  try {
    const count = (await versions()).length;
    const run = await ok(kl('apply', 'h.json', '--actor', 'erin'), 2);
    expect(run.stderr).toContain('terraform_data.sneaky would create, not planned');
    expect(run.stderr).toContain('nothing applied; re-plan');
    expect((await versions()).length).toBe(count);
    const status = await t.db.query<{ status: string }>(
      'SELECT status FROM apply_runs WHERE run_id = $1',
      [runIdOf(run.stdout)],
    );
    expect(status[0]?.status).toBe('failed');
  } finally {
    fs.writeFileSync(path.join(dir, 'slow_a.tf'), before);
  }
  // The directory again matches the trunk's slow_a.
  const current = (await instanceInput('terraform_data.slow_a')) as string;
  setVar('slow_a_version', current.replace('kl-demo-a-', ''));
});

it('a failing terraform apply commits nothing, keeps terraform state and releases its reservations', async () => {
  await plan('flaky.tf', 'f.json', { flaky_version: 'v2', flaky_fail: true });
  const count = (await versions()).length;
  const run = await ok(kl('apply', 'f.json', '--actor', 'frank'), 1);
  expect(run.stderr).toContain('terraform apply failed');
  expect(run.stderr).toContain('nothing was committed');
  const runId = runIdOf(run.stdout)!;
  const kept = path.join(dir, `kl-apply-${runId}.tfstate`);
  expect(run.stderr).toContain(kept);
  expect(JSON.parse(fs.readFileSync(kept, 'utf8'))).toMatchObject({ version: 4 });
  expect((await versions()).length).toBe(count);
  expect(await instanceInput('terraform_data.flaky')).toBe('v1');
  // Released: the fixed plan goes straight through.
  await plan('flaky.tf', 'f.json', { flaky_fail: false });
  await ok(kl('apply', 'f.json', '--actor', 'frank'));
  expect(await instanceInput('terraform_data.flaky')).toBe('v2');
});

it('SIGTERM interrupts terraform, ends the run aborted, releases its reservations and exits 143', async () => {
  const previous = await instanceInput('terraform_data.slow_a');
  await plan('slow_a.tf', 's.json', { slow_a_version: fresh() });
  const count = (await versions()).length;
  const apply = kl('apply', 's.json', '--actor', 'gina');
  await apply.seen(/terraform_data\.slow_a: (Destroying|Creating)/);
  apply.child.kill('SIGTERM');
  const run = await ok(apply, 143);
  expect(run.stderr).toContain('apply interrupted');
  expect((await versions()).length).toBe(count);
  expect(await instanceInput('terraform_data.slow_a')).toEqual(previous);
  const status = await t.db.query<{ status: string }>(
    'SELECT status FROM apply_runs WHERE run_id = $1',
    [runIdOf(run.stdout)],
  );
  expect(status[0]?.status).toBe('aborted');
  await ok(kl('apply', 's.json', '--actor', 'gina'));
});

it('after SIGKILL the lease expires and frees the addresses; kl apply abort frees them at once', async () => {
  const g = gate();
  await plan('gate.tf', 'k.json', { gate_version: fresh(), gate_file: g.file });
  const dead = start(
    process.execPath,
    [KL, 'apply', 'k.json', '--actor', 'hank', '--lease', '5s'],
    {
      detached: true,
    },
  );
  await dead.seen(/terraform_data\.gate: Creating/);
  const deadRun = runIdOf(dead.output())!;
  process.kill(-dead.child.pid!, 'SIGKILL'); // kl and its terraform, like a lost machine
  await dead.done;
  g.open();
  // Nothing renews the lease: once it runs out, the next apply reclaims the addresses.
  const taken = await ok(kl('apply', 'k.json', '--actor', 'ivy', '--wait', '30s'));
  const reclaimed = await t.db.query<{ by: string }>(
    `SELECT data->>'reclaimedBy' AS by FROM kl_events
      WHERE type = 'ReservationExpired' AND data->>'runId' = $1`,
    [deadRun],
  );
  expect(reclaimed).toEqual([{ by: runIdOf(taken.stdout) }]);

  const g2 = gate();
  await plan('gate.tf', 'k2.json', { gate_version: fresh(), gate_file: g2.file });
  const dead2 = start(process.execPath, [KL, 'apply', 'k2.json', '--actor', 'hank'], {
    detached: true,
  });
  await dead2.seen(/terraform_data\.gate: Creating/);
  const deadRun2 = runIdOf(dead2.output())!;
  process.kill(-dead2.child.pid!, 'SIGKILL');
  await dead2.done;
  g2.open();
  const blocked = await ok(kl('apply', 'k2.json', '--actor', 'ivy'), 2);
  expect(blocked.stderr).toContain(`held by hank (run ${deadRun2}`);
  // The operator's escape hatch; kld finds the run's state by itself.
  const aborted = await ok(kl('--server', kld.url, '--format', 'json', 'apply', 'abort', deadRun2));
  expect(JSON.parse(aborted.stdout)).toMatchObject([
    { run_id: deadRun2, state: STATE, status: 'aborted' },
  ]);
  await ok(kl('apply', 'k2.json', '--actor', 'ivy'));
});

it('five plain terraform plans hold the state at once; kl apply waits for them, naming one', async () => {
  // Each plan reads a terraform_remote_state that a local server answers only
  // when the test lets it: all five plans are inside their lock together.
  let pending: http.ServerResponse[] = [];
  let released = false;
  const remote = http.createServer((_req, res) => {
    if (released) res.end(EMPTY_STATE);
    else pending.push(res);
  });
  await new Promise<void>((resolve) => remote.listen(0, '127.0.0.1', resolve));
  try {
    const peek = path.join(root, 'peek');
    fs.mkdirSync(peek);
    fs.copyFileSync(path.join(dir, 'backend.tf'), path.join(peek, 'backend.tf'));
    fs.writeFileSync(
      path.join(peek, 'main.tf'),
      `data "terraform_remote_state" "held" {\n  backend = "http"\n  config = {\n` +
        `    address = "http://127.0.0.1:${(remote.address() as AddressInfo).port}/held"\n  }\n}\n`,
    );
    await ok(start(TERRAFORM, ['init', '-input=false', '-no-color'], { cwd: peek }));
    await plan('slow_a.tf', 'p.json', { slow_a_version: fresh() });

    const plans = [1, 2, 3, 4, 5].map(() =>
      start(TERRAFORM, ['plan', '-input=false', '-no-color', '-lock-timeout=0s'], { cwd: peek }),
    );
    for (let i = 0; i < 600 && pending.length < 5; i++) {
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(pending).toHaveLength(5);
    const held = await ok(kl('--server', kld.url, '--format', 'json', 'reservations', STATE));
    const holders = JSON.parse(held.stdout) as { kind: string; mode: string; glob: string }[];
    expect(holders.map((h) => [h.kind, h.mode, h.glob])).toEqual(
      Array(5).fill(['terraform-plan', 'read', '*']),
    );
    const refused = await ok(kl('apply', 'p.json', '--actor', 'carol'), 2);
    expect(refused.stderr).toMatch(
      /reservation conflict on \*:\n {2}held by a terraform plan of \S+ \(lock [0-9a-f-]{36}, OperationTypePlan/,
    );

    released = true;
    for (const res of pending) res.end(EMPTY_STATE);
    pending = [];
    for (const p of plans) await ok(p);
    await ok(kl('apply', 'p.json', '--actor', 'carol'));
  } finally {
    released = true;
    for (const res of pending) res.end(EMPTY_STATE);
    await new Promise((resolve) => remote.close(resolve));
  }
});

it('afterwards plain terraform sees exactly what kl committed: state pull, a no-op plan, history with actors', async () => {
  const pulled = await ok(tf('state', 'pull'));
  const { text } = await document();
  expect(JSON.parse(pulled.stdout)).toEqual(JSON.parse(text));
  const planned = await tf('plan', '-detailed-exitcode', '-input=false', '-no-color').done;
  expect({
    code: planned.code,
    out: planned.code === 0 ? '' : planned.stdout + planned.stderr,
  }).toEqual({
    code: 0,
    out: '',
  });
  const history = await ok(kl('--server', kld.url, 'history', STATE, '--format', 'json'));
  const rows = JSON.parse(history.stdout) as { source: string; actor: string }[];
  const applied = rows.filter((r) => r.source === 'apply').map((r) => r.actor);
  expect(new Set(applied)).toEqual(
    new Set(['alice', 'bob', 'carol', 'dave', 'frank', 'gina', 'ivy']),
  );
});
