import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { KldProcess, startKld } from '../support/kld-process';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/**
 * The real terraform binary (1.11) with its stock `http` backend against one
 * `kld serve`: init, apply, plan, state commands, pull/push, destroy,
 * concurrent runs, force-unlock and migrating a local state in.
 * Only `terraform_data` and `local-exec` are used: no provider is installed.
 */

jest.setTimeout(120_000);

const TERRAFORM = process.env.KL_TEST_TERRAFORM ?? 'terraform';
const COMMAND_TIMEOUT_MS = 90_000;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  /** stdout + stderr, ANSI colours removed. */
  out: string;
  startedAt: number;
  endedAt: number;
}

interface StateDoc {
  version: number;
  serial: number;
  lineage: string;
  terraform_version: string;
  outputs: Record<string, { value: unknown; type?: unknown; sensitive?: boolean }>;
  resources: {
    module?: string;
    mode: string;
    type: string;
    name: string;
    instances: { index_key?: number | string; attributes: Record<string, unknown> }[];
  }[];
}

let root: string;
let tfEnv: NodeJS.ProcessEnv;
let t: TestDatabase;
let kld: KldProcess;
const running = new Set<ChildProcess>();

beforeAll(async () => {
  const version = spawnSync(TERRAFORM, ['version', '-json'], { encoding: 'utf8' });
  if (version.error || version.status !== 0) {
    throw new Error(
      `terraform is required for this suite but "${TERRAFORM} version" failed ` +
        `(${version.error?.message ?? `exit ${version.status}: ${version.stderr}`}). ` +
        'Install terraform >= 1.5 on PATH or set KL_TEST_TERRAFORM.',
    );
  }
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-tf-e2e-'));
  const tfrc = path.join(root, 'terraformrc.hcl');
  // Nothing to install: terraform_data and local-exec are built in.
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
  t = await createTestDatabase('kl_tf_backend');
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

/** Runs terraform in `dir`; never rejects (the exit code is in the result). */
function tf(dir: string, args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    const startedAt = Date.now();
    const child = spawn(TERRAFORM, args, {
      cwd: dir,
      env: tfEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    running.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), COMMAND_TIMEOUT_MS);
    const done = (code: number | null, extra = '') => {
      clearTimeout(timer);
      running.delete(child);
      resolve({
        code,
        stdout,
        stderr: stderr + extra,
        out: stripAnsi(stdout + stderr + extra),
        startedAt,
        endedAt: Date.now(),
      });
    };
    child.on('error', (err) => done(null, `\nspawn failed: ${err.message}`));
    child.on('close', (code) => done(code));
  });
}

/** Like `tf`, but fails the test with terraform's output unless the exit code is `expected`. */
async function tfOk(dir: string, args: string[], expected = 0): Promise<Run> {
  const r = await tf(dir, args);
  if (r.code !== expected) {
    throw new Error(
      `terraform ${args.join(' ')} in ${dir}: exit ${r.code}, expected ${expected}\n${r.out}\n--- kld ---\n${kld.output().slice(-3000)}`,
    );
  }
  return r;
}

function backendBlock(name: string, style: 'methods' | 'aliases' = 'methods'): string {
  const state = `${kld.url}/v1/states/${name}`;
  if (style === 'aliases') {
    return `terraform {
  backend "http" {
    address        = "${state}"
    lock_address   = "${kld.url}/v1/state-lock/${name}"
    unlock_address = "${kld.url}/v1/state-unlock/${name}"
    lock_method    = "POST"
    unlock_method  = "POST"
  }
}
`;
  }
  return `terraform {
  backend "http" {
    address        = "${state}"
    lock_address   = "${state}"
    unlock_address = "${state}"
    lock_method    = "LOCK"
    unlock_method  = "UNLOCK"
    username       = "alice"
    password       = "not-checked"
  }
}
`;
}

function writeFiles(dir: string, files: Record<string, string>): void {
  for (const [file, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    fs.writeFileSync(path.join(dir, file), text);
  }
}

function newDir(label: string): string {
  return fs.mkdtempSync(path.join(root, `${label}-`));
}

async function getState(
  name: string,
  serial?: number,
): Promise<{ status: number; doc?: StateDoc }> {
  const r = await fetch(
    `${kld.url}/v1/states/${name}${serial === undefined ? '' : `?serial=${serial}`}`,
  );
  const text = await r.text();
  return { status: r.status, doc: r.status === 200 ? (JSON.parse(text) as StateDoc) : undefined };
}

async function currentDoc(name: string): Promise<StateDoc> {
  const { status, doc } = await getState(name);
  expect(status).toBe(200);
  return doc!;
}

async function versionsOf(name: string): Promise<{ version: number; serial: number }[]> {
  return t.db.query(
    `SELECT v.version, v.serial::int AS serial
       FROM state_versions v JOIN states s ON s.state_id = v.state_id
      WHERE s.name = $1 AND s.deleted_at IS NULL
      ORDER BY v.version`,
    [name],
  );
}

async function lockHolder(name: string): Promise<{ lock_id: string; operation: string } | null> {
  const rows = await t.db.query<{ lock_id: string; operation: string }>(
    `SELECT l.lock_id, l.operation FROM state_locks l JOIN states s ON s.state_id = l.state_id
      WHERE s.name = $1 AND s.deleted_at IS NULL`,
    [name],
  );
  return rows[0] ?? null;
}

async function lockEvents(
  name: string,
): Promise<{ type: string; lockId: string; forced: boolean | null; operation: string | null }[]> {
  return t.db.query(
    `SELECT type, data->>'lockId' AS "lockId", (data->>'forced')::boolean AS forced,
            data->'info'->>'Operation' AS operation
       FROM kl_events WHERE stream_id = $1 AND type IN ('LockAcquired', 'LockReleased')
      ORDER BY stream_revision`,
    [`state-${name}`],
  );
}

function addresses(doc: StateDoc): string[] {
  const out: string[] = [];
  for (const r of doc.resources) {
    const base = `${r.module ? `${r.module}.` : ''}${r.mode === 'data' ? 'data.' : ''}${r.type}.${r.name}`;
    for (const i of r.instances) {
      out.push(
        i.index_key === undefined
          ? base
          : typeof i.index_key === 'number'
            ? `${base}[${i.index_key}]`
            : `${base}["${i.index_key}"]`,
      );
    }
  }
  return out.sort();
}

const lines = (s: string) =>
  s
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);

// ---------------------------------------------------------------------------

const MAIN_TF = `
variable "rev" {
  type    = string
  default = "v1"
}

resource "terraform_data" "root" {
  input = "root-\${var.rev}"
}

resource "terraform_data" "item" {
  count = 20
  input = {
    idx  = count.index
    root = terraform_data.root.output
  }
}

resource "terraform_data" "named" {
  for_each         = toset([for i in range(15) : format("k%02d", i)])
  input            = "\${each.key}-\${terraform_data.item[0].id}"
  triggers_replace = [terraform_data.root.id]
}

module "child" {
  source = "./modules/child"
  prefix = terraform_data.root.output
}

resource "terraform_data" "extra" {
  count = 2
  input = module.child.ids[count.index]
}

resource "terraform_data" "sink" {
  input = {
    items = length(terraform_data.item)
    named = keys(terraform_data.named)
    child = module.child.ids
  }
}

output "root" {
  value = terraform_data.root.output
}

output "child_ids" {
  value = module.child.ids
}

output "secret" {
  value     = "s3cr3t-\${var.rev}"
  sensitive = true
}
`;

const CHILD_TF = `
variable "prefix" {
  type = string
}

resource "terraform_data" "leaf" {
  count = 10
  input = "\${var.prefix}-\${count.index}"
}

resource "terraform_data" "sum" {
  input = terraform_data.leaf[*].id
}

output "ids" {
  value = terraform_data.leaf[*].id
}
`;

const INSTANCES = 1 + 20 + 15 + 10 + 1 + 2 + 1; // root, item, named, leaf, sum, extra, sink

describe('terraform with the http backend', () => {
  const name = `team/prod/network-${randomUUID().slice(0, 8)}`;
  let dir: string;

  beforeAll(() => {
    dir = newDir('main');
    writeFiles(dir, {
      'backend.tf': backendBlock(name),
      'main.tf': MAIN_TF,
      'modules/child/main.tf': CHILD_TF,
    });
  });

  it('inits and applies ~50 instances with dependencies, a module and outputs', async () => {
    const init = await tfOk(dir, ['init', '-input=false', '-no-color']);
    expect(init.out).toContain('Successfully configured the backend "http"');
    expect((await getState(name)).status).toBe(404);

    const apply = await tfOk(dir, ['apply', '-auto-approve', '-input=false', '-no-color']);
    expect(apply.out).toContain(
      `Apply complete! Resources: ${INSTANCES} added, 0 changed, 0 destroyed.`,
    );

    const doc = await currentDoc(name);
    expect(addresses(doc)).toHaveLength(INSTANCES);
    expect(addresses(doc)).toContain('module.child.terraform_data.leaf[9]');
    expect(addresses(doc)).toContain('terraform_data.named["k14"]');
    expect(doc.outputs.secret).toMatchObject({ value: 's3cr3t-v1', sensitive: true });
    expect(doc.outputs.root.value).toBe('root-v1');

    // The read models agree with the document.
    const [state] = await t.db.query<{ instance_count: number; current_serial: number }>(
      `SELECT instance_count, current_serial::int AS current_serial FROM states
        WHERE name = $1 AND deleted_at IS NULL`,
      [name],
    );
    expect(state).toEqual({ instance_count: INSTANCES, current_serial: doc.serial });
    const current = await t.db.query<{ address: string }>(
      'SELECT address FROM current_resources WHERE state_name = $1 ORDER BY address',
      [name],
    );
    expect(current.map((r) => r.address).sort()).toEqual(addresses(doc));
    const outputs = await t.db.query<{ name: string; sensitive: boolean }>(
      `SELECT o.name, o.sensitive FROM outputs o JOIN states s USING (state_id)
        WHERE s.name = $1 AND s.deleted_at IS NULL AND o.delete_version IS NULL ORDER BY o.name`,
      [name],
    );
    expect(outputs).toEqual([
      { name: 'child_ids', sensitive: false },
      { name: 'root', sensitive: false },
      { name: 'secret', sensitive: true },
    ]);
    const deps = await t.db.query<{ from_address: string; to_address: string }>(
      `SELECT d.from_address, d.to_address FROM resource_dependencies d JOIN states s USING (state_id)
        WHERE s.name = $1 AND s.deleted_at IS NULL AND d.delete_version IS NULL`,
      [name],
    );
    expect(deps).toEqual(
      expect.arrayContaining([
        { from_address: 'terraform_data.item[3]', to_address: 'terraform_data.root' },
        { from_address: 'terraform_data.sink', to_address: 'module.child.terraform_data.leaf' },
        { from_address: 'terraform_data.extra[1]', to_address: 'module.child.terraform_data.leaf' },
        {
          from_address: 'module.child.terraform_data.sum',
          to_address: 'module.child.terraform_data.leaf',
        },
      ]),
    );

    // Every version came from terraform's http backend, attributed to its basic-auth user.
    const sources = await t.db.query<{ source: string; actor: string }>(
      `SELECT DISTINCT v.source, v.actor FROM state_versions v JOIN states s USING (state_id)
        WHERE s.name = $1 AND s.deleted_at IS NULL`,
      [name],
    );
    expect(sources).toEqual([{ source: 'http', actor: 'alice' }]);

    // terraform locked with LOCK and released with UNLOCK, by the same ID.
    expect(await lockHolder(name)).toBeNull();
    const events = await lockEvents(name);
    const applyLock = events.find(
      (e) => e.type === 'LockAcquired' && e.operation === 'OperationTypeApply',
    );
    expect(applyLock).toBeDefined();
    expect(events).toContainEqual(
      expect.objectContaining({ type: 'LockReleased', lockId: applyLock!.lockId, forced: false }),
    );

    const out = await tfOk(dir, ['output', '-json']);
    expect(JSON.parse(out.stdout).secret).toEqual({
      sensitive: true,
      type: 'string',
      value: 's3cr3t-v1',
    });
  });

  it('plans no changes (-detailed-exitcode 0) and writes no version doing so', async () => {
    const before = await versionsOf(name);
    const plan = await tfOk(dir, ['plan', '-detailed-exitcode', '-input=false', '-no-color'], 0);
    expect(plan.out).toContain('No changes.');
    expect(await versionsOf(name)).toEqual(before);
    expect(await lockHolder(name)).toBeNull();
  });

  it('applies a change as a new version and keeps the old one readable by ?serial=', async () => {
    const before = await currentDoc(name);
    const versionsBefore = await versionsOf(name);
    writeFiles(dir, { 'terraform.tfvars': 'rev = "v2"\n' });
    const plan = await tfOk(dir, ['plan', '-detailed-exitcode', '-input=false', '-no-color'], 2);
    expect(plan.out).toMatch(/Plan: \d+ to add, \d+ to change, \d+ to destroy/);
    await tfOk(dir, ['apply', '-auto-approve', '-input=false', '-no-color']);

    const after = await currentDoc(name);
    expect(after.serial).toBeGreaterThan(before.serial);
    expect(after.lineage).toBe(before.lineage);
    expect(after.outputs.root.value).toBe('root-v2');
    expect(after.outputs.secret.value).toBe('s3cr3t-v2');
    const versionsAfter = await versionsOf(name);
    expect(versionsAfter.length).toBeGreaterThan(versionsBefore.length);
    expect(versionsAfter[versionsAfter.length - 1].serial).toBe(after.serial);

    const old = await getState(name, before.serial);
    expect(old.status).toBe(200);
    expect(old.doc).toEqual(before);
    expect(old.doc!.outputs.root.value).toBe('root-v1');

    await tfOk(dir, ['plan', '-detailed-exitcode', '-input=false', '-no-color'], 0);
  });

  it('lists, shows, moves and removes through terraform state, each write a version', async () => {
    const doc = await currentDoc(name);
    const list = await tfOk(dir, ['state', 'list']);
    expect(lines(list.stdout).sort()).toEqual(addresses(doc));

    const show = await tfOk(dir, [
      'state',
      'show',
      '-no-color',
      'module.child.terraform_data.leaf[3]',
    ]);
    expect(show.out).toContain('resource "terraform_data" "leaf"');
    expect(show.out).toContain('"root-v2-3"');

    let versions = (await versionsOf(name)).length;
    await tfOk(dir, ['state', 'mv', 'terraform_data.sink', 'terraform_data.sink_moved']);
    expect((await versionsOf(name)).length).toBe(++versions);
    let now = addresses(await currentDoc(name));
    expect(now).toContain('terraform_data.sink_moved');
    expect(now).not.toContain('terraform_data.sink');

    await tfOk(dir, ['state', 'mv', 'terraform_data.named["k00"]', 'terraform_data.named["zz"]']);
    expect((await versionsOf(name)).length).toBe(++versions);

    await tfOk(dir, ['state', 'rm', 'terraform_data.sink_moved', 'terraform_data.named["zz"]']);
    expect((await versionsOf(name)).length).toBe(++versions);
    now = addresses(await currentDoc(name));
    expect(now).toHaveLength(INSTANCES - 2);
    const current = await t.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM current_resources WHERE state_name = $1',
      [name],
    );
    expect(current[0].n).toBe(INSTANCES - 2);

    // Terraform puts back what was removed.
    const apply = await tfOk(dir, ['apply', '-auto-approve', '-input=false', '-no-color']);
    expect(apply.out).toContain('Resources: 2 added, 0 changed, 0 destroyed.');
    expect(addresses(await currentDoc(name))).toHaveLength(INSTANCES);
  });

  it('pulls, pushes an edited copy, refuses then force-pushes an older serial; nothing is overwritten', async () => {
    const pull = await tfOk(dir, ['state', 'pull']);
    const pulled = JSON.parse(pull.stdout) as StateDoc;
    expect(pulled).toEqual(await currentDoc(name));
    const s = pulled.serial;
    const originalFile = path.join(dir, 'pulled.tfstate');
    fs.writeFileSync(originalFile, pull.stdout);

    const edited = structuredClone(pulled);
    edited.serial = s + 1;
    edited.outputs.root = { value: 'edited-by-hand', type: 'string' };
    const editedFile = path.join(dir, 'edited.tfstate');
    fs.writeFileSync(editedFile, JSON.stringify(edited, null, 2));
    const versionsBefore = (await versionsOf(name)).length;

    await tfOk(dir, ['state', 'push', editedFile]);
    const afterPush = await currentDoc(name);
    // terraform's remote state bumps the serial of what it writes.
    expect(afterPush.serial).toBe(s + 2);
    expect(afterPush.outputs.root.value).toBe('edited-by-hand');
    expect((await versionsOf(name)).length).toBe(versionsBefore + 1);

    // A lower serial is refused by terraform itself without -force: no version.
    const refused = await tf(dir, ['state', 'push', originalFile]);
    expect(refused.code).not.toBe(0);
    expect(refused.out).toMatch(/cannot import state with serial/);
    expect((await versionsOf(name)).length).toBe(versionsBefore + 1);

    await tfOk(dir, ['state', 'push', '-force', originalFile]);
    const afterForce = await currentDoc(name);
    expect(afterForce.serial).toBe(s + 1);
    expect(afterForce.outputs.root.value).toBe('root-v2');
    expect(afterForce.resources).toEqual(pulled.resources);
    expect(afterForce.lineage).toBe(pulled.lineage);

    const versions = await versionsOf(name);
    expect(versions.length).toBe(versionsBefore + 2);
    expect(versions.slice(-3).map((v) => v.serial)).toEqual([s, s + 2, s + 1]);
    // Every one of them is still there.
    expect((await getState(name, s)).doc).toEqual(pulled);
    expect((await getState(name, s + 2)).doc!.outputs.root.value).toBe('edited-by-hand');
    expect((await getState(name, s + 1)).doc!.outputs.root.value).toBe('root-v2');

    // And terraform is happy with what it reads back.
    await tfOk(dir, ['plan', '-detailed-exitcode', '-input=false', '-no-color'], 0);
  });

  it('takes a force-push of another lineage and records which lineage it replaced', async () => {
    const pulled = JSON.parse((await tfOk(dir, ['state', 'pull'])).stdout) as StateDoc;
    const foreign = { ...structuredClone(pulled), lineage: randomUUID(), serial: 1 };
    const foreignFile = path.join(dir, 'foreign.tfstate');
    fs.writeFileSync(foreignFile, JSON.stringify(foreign, null, 2));

    const refused = await tf(dir, ['state', 'push', foreignFile]);
    expect(refused.code).not.toBe(0);
    expect(refused.out).toMatch(/cannot import state with lineage/);

    await tfOk(dir, ['state', 'push', '-force', foreignFile]);
    const history = (await (await fetch(`${kld.url}/v1/api/states/${name}/history`)).json()) as {
      versions: { lineage: string; lineageChangedFrom: string | null }[];
    };
    expect(history.versions.at(-1)).toMatchObject({
      lineage: foreign.lineage,
      lineageChangedFrom: pulled.lineage,
    });
    // Back to the original lineage for the tests that follow.
    fs.writeFileSync(foreignFile, JSON.stringify({ ...pulled, serial: pulled.serial + 5 }));
    await tfOk(dir, ['state', 'push', '-force', foreignFile]);
    expect((await currentDoc(name)).lineage).toBe(pulled.lineage);
  });

  it('destroys everything, leaving an empty current version and the history', async () => {
    const versionsBefore = (await versionsOf(name)).length;
    const destroy = await tfOk(dir, ['destroy', '-auto-approve', '-input=false', '-no-color']);
    expect(destroy.out).toContain(`Destroy complete! Resources: ${INSTANCES} destroyed.`);
    const doc = await currentDoc(name);
    expect(doc.resources).toEqual([]);
    const current = await t.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM current_resources WHERE state_name = $1',
      [name],
    );
    expect(current[0].n).toBe(0);
    expect((await versionsOf(name)).length).toBeGreaterThan(versionsBefore);
    expect((await getState(name, 1)).status).toBe(200);
    expect(await lockHolder(name)).toBeNull();
  });
});

describe('terraform runs that contend for the lock', () => {
  const name = `team/locks/slow-${randomUUID().slice(0, 8)}`;
  const SLOW = `
variable "rev" {
  type    = string
  default = "1"
}

resource "terraform_data" "slow" {
  triggers_replace = var.rev
  provisioner "local-exec" {
    command = "sleep 6"
  }
}

resource "terraform_data" "after" {
  input = terraform_data.slow.id
}
`;
  let first: string;
  let second: string;

  beforeAll(async () => {
    first = newDir('slow-a');
    second = newDir('slow-b');
    for (const d of [first, second]) {
      writeFiles(d, { 'backend.tf': backendBlock(name), 'main.tf': SLOW });
      await tfOk(d, ['init', '-input=false', '-no-color']);
    }
  });

  it('fails a second apply naming the first one’s lock, and lets -lock-timeout=60s wait its turn', async () => {
    const slow = tf(first, ['apply', '-auto-approve', '-input=false', '-no-color']);
    let holder: { lock_id: string; operation: string } | null = null;
    const deadline = Date.now() + 30_000;
    while (!(holder = await lockHolder(name)) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(holder).not.toBeNull();
    expect(holder!.operation).toBe('OperationTypeApply');

    const refused = await tf(second, [
      'apply',
      '-auto-approve',
      '-input=false',
      '-no-color',
      '-lock-timeout=0s',
    ]);
    expect(refused.code).toBe(1);
    expect(refused.out).toContain('Error acquiring the state lock');
    expect(refused.out).toContain(holder!.lock_id);

    const patient = tf(second, [
      'apply',
      '-auto-approve',
      '-input=false',
      '-no-color',
      '-lock-timeout=60s',
    ]);
    const [a, c] = await Promise.all([slow, patient]);
    if (a.code !== 0 || c.code !== 0) {
      throw new Error(`first: ${a.code}\n${a.out}\n--- waiting: ${c.code}\n${c.out}`);
    }
    // The waiting run started while the first still held the lock and finished after it.
    expect(c.startedAt).toBeLessThan(a.endedAt);
    expect(c.endedAt).toBeGreaterThanOrEqual(a.endedAt);
    expect(a.out).toContain('Apply complete! Resources: 2 added');
    expect(c.out).toContain('No changes.');

    // The log: the first run's lock, released; then the patient one's; the refused run never held it.
    const events = await lockEvents(name);
    const acquired = events.filter((e) => e.type === 'LockAcquired').map((e) => e.lockId);
    expect(acquired[0]).toBe(holder!.lock_id);
    expect(new Set(acquired).size).toBe(acquired.length);
    expect(events.every((e, i) => e.type === (i % 2 === 0 ? 'LockAcquired' : 'LockReleased'))).toBe(
      true,
    );
    expect(events.filter((e) => e.type === 'LockReleased').every((e) => e.forced === false)).toBe(
      true,
    );
    expect(await lockHolder(name)).toBeNull();
  });

  it('force-unlocks a stuck lock with terraform force-unlock -force <id>', async () => {
    const stuckId = `stuck-${randomUUID()}`;
    const info = {
      ID: stuckId,
      Operation: 'OperationTypeApply',
      Info: '',
      Who: 'ghost@crashed-ci-runner',
      Version: '1.11.4',
      Created: new Date().toISOString(),
      Path: '',
    };
    const locked = await fetch(`${kld.url}/v1/states/${name}`, {
      method: 'LOCK',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(info),
    });
    expect(locked.status).toBe(200);

    const blocked = await tf(second, ['plan', '-input=false', '-no-color', '-lock-timeout=0s']);
    expect(blocked.code).toBe(1);
    expect(blocked.out).toContain('Error acquiring the state lock');
    expect(blocked.out).toContain(stuckId);

    const unlock = await tfOk(second, ['force-unlock', '-force', stuckId]);
    expect(unlock.out).toContain('Terraform state has been successfully unlocked!');
    expect(await lockHolder(name)).toBeNull();
    const events = await lockEvents(name);
    expect(events[events.length - 1]).toEqual({
      type: 'LockReleased',
      lockId: stuckId,
      forced: true,
      operation: null,
    });

    await tfOk(second, ['plan', '-detailed-exitcode', '-input=false', '-no-color'], 0);
  });
});

describe('terraform init -migrate-state', () => {
  it('copies a local state into kld (-force-copy) with its resources and outputs', async () => {
    const name = `team/migrated/app-${randomUUID().slice(0, 8)}`;
    const dir = newDir('migrate');
    const config = `
resource "terraform_data" "a" {
  count = 3
  input = "a-\${count.index}"
}

resource "terraform_data" "b" {
  input = terraform_data.a[*].output
}

output "b" {
  value = terraform_data.b.output
}
`;
    writeFiles(dir, { 'main.tf': config });
    await tfOk(dir, ['init', '-input=false', '-no-color']);
    await tfOk(dir, ['apply', '-auto-approve', '-input=false', '-no-color']);
    const local = JSON.parse(
      fs.readFileSync(path.join(dir, 'terraform.tfstate'), 'utf8'),
    ) as StateDoc;
    expect(addresses(local)).toHaveLength(4);
    expect((await getState(name)).status).toBe(404);

    // The aliases (POST state-lock / state-unlock), as behind a proxy without custom methods.
    writeFiles(dir, { 'backend.tf': backendBlock(name, 'aliases') });
    const init = await tfOk(dir, [
      'init',
      '-migrate-state',
      '-force-copy',
      '-input=false',
      '-no-color',
    ]);
    expect(init.out).toContain('Successfully configured the backend "http"');

    const remote = await currentDoc(name);
    // Terraform's remote state (not kld) starts a new lineage when the
    // destination is empty: it refreshes, finds no snapshot and generates one.
    expect(remote.lineage).toMatch(
      /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/,
    );
    expect(remote.serial).toBeGreaterThanOrEqual(1);
    expect(remote.resources).toEqual(local.resources);
    expect(remote.outputs).toEqual(local.outputs);
    expect(await versionsOf(name)).toHaveLength(1);
    const events = await lockEvents(name);
    expect(events.map((e) => e.type)).toEqual(['LockAcquired', 'LockReleased']);
    expect(await lockHolder(name)).toBeNull();

    const list = await tfOk(dir, ['state', 'list']);
    expect(lines(list.stdout).sort()).toEqual(addresses(local));
    await tfOk(dir, ['plan', '-detailed-exitcode', '-input=false', '-no-color'], 0);
  });
});

describe('values terraform writes that must survive the round trip', () => {
  it('applies a string holding a NUL character (\\u0000) and reads it back', async () => {
    const name = `team/values/nul-${randomUUID().slice(0, 8)}`;
    const dir = newDir('nul');
    writeFiles(dir, {
      'backend.tf': backendBlock(name),
      'main.tf': `
resource "terraform_data" "nul" {
  input = "a\\u0000b"
}

output "nul" {
  value = terraform_data.nul.output
}
`,
    });
    await tfOk(dir, ['init', '-input=false', '-no-color']);
    // Today: kld answers the POST with 500 (jsonb refuses \u0000) and terraform
    // ends with "Failed to save state" and an errored.tfstate.
    await tfOk(dir, ['apply', '-auto-approve', '-input=false', '-no-color']);
    const served = await fetch(`${kld.url}/v1/states/${name}`);
    expect(await served.text()).toContain('a\\u0000b');
    await tfOk(dir, ['plan', '-detailed-exitcode', '-input=false', '-no-color'], 0);
  });

  it('keeps numbers beyond double precision exact, so the next plan has no changes', async () => {
    const name = `team/values/bignum-${randomUUID().slice(0, 8)}`;
    const dir = newDir('bignum');
    writeFiles(dir, {
      'backend.tf': backendBlock(name),
      'main.tf': `
resource "terraform_data" "big" {
  input = 9007199254740993
}

output "huge" {
  value = 123456789012345678901234567890
}
`,
    });
    await tfOk(dir, ['init', '-input=false', '-no-color']);
    await tfOk(dir, ['apply', '-auto-approve', '-input=false', '-no-color']);
    const out = await tfOk(dir, ['output', '-json']);
    expect(out.stdout).toContain('123456789012345678901234567890');
    // Today the served state holds 9007199254740992 and 1.2345678901234568e+29,
    // so terraform plans to change both (exit 2).
    const plan = await tf(dir, ['plan', '-detailed-exitcode', '-input=false', '-no-color']);
    expect({ code: plan.code, out: plan.code === 0 ? '' : plan.out }).toEqual({ code: 0, out: '' });
  });
});
