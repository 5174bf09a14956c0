import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ChildRunner, ok, Run, RunOptions } from '../support/child-runner';
import { kltestMirror, offlineTerraformEnv } from '../support/kltest-mirror';
import { KL, KldProcess, processesMatching, startKld } from '../support/kld-process';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/**
 * `kl refresh` end to end with the kltest provider (plugin protocol 6):
 * terraform applies through kld's http backend, an object is edited behind
 * its back, `kl refresh` finds the drift and commits it, `kl drift` lists it,
 * a v0 state is stored upgraded, and SIGINT during a slow read ends the
 * refresh within 5 s without leaving a provider process.
 */

jest.setTimeout(180_000);

const TERRAFORM = process.env.KL_TEST_TERRAFORM ?? 'terraform';
const STATE = 'e2e/refresh-kltest';
const SOURCE = 'registry.terraform.io/kilolock/kltest';
const COMMAND_TIMEOUT_MS = 90_000;

interface StateDoc {
  serial: number;
  lineage: string;
  resources: {
    mode: string;
    type: string;
    name: string;
    instances: { schema_version: number; attributes: Record<string, unknown> }[];
  }[];
}

let root: string;
let workDir: string;
let objectsDir: string;
let mirror: string;
let rpcLog: string;
let env: NodeJS.ProcessEnv;
let t: TestDatabase;
let kld: KldProcess;
const runner = new ChildRunner(() => ({ cwd: workDir, env }), COMMAND_TIMEOUT_MS);

function run(command: string, args: string[], options: RunOptions = {}): Promise<Run> {
  return runner.run(command, args, options);
}

const terraform = (args: string[]) => run(TERRAFORM, [...args, '-no-color', '-input=false']);
const kl = (args: string[], options: Parameters<typeof run>[2] = {}) =>
  run(process.execPath, [KL, '--server', kld.url, ...args], options);

async function currentState(): Promise<StateDoc> {
  const res = await fetch(`${kld.url}/v1/states/${STATE}`);
  expect(res.status).toBe(200);
  return (await res.json()) as StateDoc;
}

function item(doc: StateDoc): StateDoc['resources'][number]['instances'][number] {
  const r = doc.resources.find((x) => x.mode === 'managed' && x.type === 'kltest_item');
  if (!r) throw new Error('kltest_item.a is not in the state');
  return r.instances[0];
}

function objectPath(type: string, id: string): string {
  return path.join(objectsDir, type, `${id}.json`);
}

function editObject(type: string, id: string, change: Record<string, unknown>): void {
  const file = objectPath(type, id);
  const body = JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>;
  fs.writeFileSync(file, JSON.stringify({ ...body, ...change }));
}

/** Providers launched from this suite's mirror (other suites run kltest too). */
function kltestProcesses(): number[] {
  return processesMatching(mirror);
}

beforeAll(async () => {
  const probe = spawnSync(TERRAFORM, ['version'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) {
    throw new Error(`terraform (1.11.x) must be on PATH for this suite (or set KL_TEST_TERRAFORM)`);
  }
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-refresh-e2e-'));
  workDir = path.join(root, 'work');
  objectsDir = path.join(root, 'objects');
  rpcLog = path.join(root, 'rpc.log');
  for (const dir of [workDir, objectsDir]) fs.mkdirSync(dir, { recursive: true });
  const kltest = kltestMirror(root);
  mirror = kltest.mirror;
  env = {
    ...offlineTerraformEnv(),
    TF_CLI_CONFIG_FILE: kltest.cliConfig,
    KLTEST_RPC_LOG: rpcLog,
    // Resolved by `kl refresh` from the stored {"env": "KLTEST_OBJECTS"} reference.
    KLTEST_OBJECTS: objectsDir,
    // A schema cache of our own: kl then fetches kltest's schema and hands it to kld.
    KL_CACHE_DIR: path.join(root, 'cache'),
  };

  t = await createTestDatabase('kl_refresh_kltest');
  kld = await startKld({ KL_DATABASE_URL: t.url });
  const address = `${kld.url}/v1/states/${STATE}`;
  fs.writeFileSync(
    path.join(workDir, 'main.tf'),
    `terraform {
  required_providers {
    kltest = { source = "kilolock/kltest", version = "0.1.0" }
  }
  backend "http" {
    address        = "${address}"
    lock_address   = "${address}"
    unlock_address = "${address}"
    lock_method    = "LOCK"
    unlock_method  = "UNLOCK"
  }
}

provider "kltest" {
  state_dir = "${objectsDir}"
}

resource "kltest_item" "a" {
  name    = "alpha"
  comment = "hello"
  tags    = ["red", "green"]

  rule {
    port     = 80
    protocol = "tcp"
  }
  settings {
    enabled = true
    level   = 3
  }
}

resource "kltest_bucket" "b" {
  name   = "bucket-of-\${kltest_item.a.id}"
  size   = 1.5
  labels = { env = "dev" }
}

data "kltest_item" "a" {
  id = kltest_item.a.id
}
`,
  );
  await ok(terraform(['init']), 'terraform init');
  await ok(terraform(['apply', '-auto-approve']), 'terraform apply');
});

afterAll(async () => {
  runner.killAll();
  await kld?.stop();
  await t?.drop();
  if (root) fs.rmSync(root, { recursive: true, force: true });
});

describe('kl refresh with the kltest provider', () => {
  it('stores the provider config with an env reference, never its value', async () => {
    const config = path.join(root, 'kltest.json');
    fs.writeFileSync(config, JSON.stringify({ state_dir: { env: 'KLTEST_OBJECTS' } }));

    await ok(
      kl(['provider', 'configure', STATE, 'kilolock/kltest', '--from-json', config]),
      'kl provider configure',
    );

    const list = await ok(kl(['--format', 'json', 'provider', 'list', STATE]), 'kl provider list');
    expect(JSON.parse(list.stdout)).toEqual([
      expect.objectContaining({
        source: SOURCE,
        alias: null,
        config: { state_dir: { env: 'KLTEST_OBJECTS' } },
      }),
    ]);
    const get = await ok(
      kl(['--format', 'json', 'provider', 'get', STATE, 'kilolock/kltest']),
      'kl provider get',
    );
    expect(JSON.parse(get.stdout)).toEqual({
      source: SOURCE,
      alias: null,
      config: { state_dir: { env: 'KLTEST_OBJECTS' } },
      updated_at: expect.any(String),
      updated_by: expect.any(String),
      history: [
        {
          at: expect.any(String),
          actor: expect.any(String),
          action: 'configured',
          source: SOURCE,
          alias: null,
          config: { state_dir: { env: 'KLTEST_OBJECTS' } },
          changed_paths: ['state_dir'],
        },
      ],
    });
    // Stored again with another variable: the table view shows both changes, oldest first.
    fs.writeFileSync(config, JSON.stringify({ state_dir: { env: 'KLTEST_DIR_RENAMED' } }));
    const again = await ok(
      kl(['provider', 'configure', STATE, 'kilolock/kltest', '--from-json', config]),
      'kl provider configure again',
    );
    expect(again.stdout).toMatch(/ \(replacing the one .+ stored at \d{4}-\d\d-\d\dT/);
    const table = await ok(kl(['provider', 'get', STATE, 'kilolock/kltest']), 'kl provider get');
    expect(table.stdout).toContain('"env": "KLTEST_DIR_RENAMED"');
    const rows = table.stdout.split('history (oldest first):\n')[1].split('\n');
    expect(rows.filter((l) => / configured /.test(l))).toEqual([
      expect.stringMatching(/ configured │ state_dir +│/),
      expect.stringMatching(/ configured │ state_dir\.env +│/),
    ]);
    fs.writeFileSync(config, JSON.stringify({ state_dir: { env: 'KLTEST_OBJECTS' } }));
    await ok(
      kl(['provider', 'configure', STATE, 'kilolock/kltest', '--from-json', config]),
      'kl provider configure back',
    );
  });

  it('refuses an env reference that names no variable, and a config for no state', async () => {
    const bad = path.join(root, 'bad.json');
    fs.writeFileSync(bad, JSON.stringify({ state_dir: { env: 5 } }));
    const notAName = await kl([
      'provider',
      'configure',
      STATE,
      'kilolock/kltest',
      '--from-json',
      bad,
    ]);
    expect(notAName.code).toBe(1);
    expect(notAName.stderr).toBe(
      'kl: {"env": …} at state_dir must name an environment variable as a string, got 5\n',
    );
    fs.writeFileSync(bad, JSON.stringify({ state_dir: { env: 'KLTEST_OBJECTS' } }));
    const noState = await kl([
      'provider',
      'configure',
      'e2e/no-such-state',
      'kilolock/kltest',
      '--from-json',
      bad,
    ]);
    expect(noState.code).toBe(1);
    expect(noState.stderr).toMatch(/^kl: state e2e\/no-such-state does not exist: /);
    expect(noState.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('refreshes an in-sync state: exit 0, no drift, a new version with the next serial', async () => {
    const before = await currentState();

    const r = await kl(['refresh', STATE, '--provider-search-path', mirror]);

    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(
      /^status=succeeded checked=2 changed=0 normalized=0 gone=0 failed=0 skipped=0 version=\d+/,
    );
    const after = await currentState();
    expect(after.serial).toBe(before.serial + 1);
    expect(after.lineage).toBe(before.lineage);
  });

  it('refuses a key kltest does not have once a refresh has given kld its schema', async () => {
    const bad = path.join(root, 'typo.json');
    fs.writeFileSync(bad, JSON.stringify({ state_dri: objectsDir }));
    const typo = await kl(['provider', 'configure', STATE, 'kilolock/kltest', '--from-json', bad]);
    expect(typo.code).toBe(1);
    expect(typo.stderr).toMatch(
      /^kl: provider registry\.terraform\.io\/kilolock\/kltest 0\.1\.0: provider config has no attribute "state_dri" in the provider's schema; .*--no-schema-check/,
    );
    expect(typo.stderr.trim().split('\n')).toHaveLength(1);
    const stored = await ok(
      kl(['--format', 'json', 'provider', 'get', STATE, 'kilolock/kltest']),
      'kl provider get',
    );
    expect(JSON.parse(stored.stdout).config).toEqual({ state_dir: { env: 'KLTEST_OBJECTS' } });
  });

  it('finds an out-of-band edit, commits it, and kl drift lists it', async () => {
    const id = String(item(await currentState()).attributes.id);
    editObject('kltest_item', id, { comment: 'edited outside', tags: ['blue'] });

    const r = await kl(['refresh', STATE, '--provider-search-path', mirror]);

    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/status=succeeded checked=2 changed=1 normalized=0 gone=0 failed=0 /);
    expect(r.stdout).toContain('drifted:\n  kltest_item.a\n');
    expect(item(await currentState()).attributes).toMatchObject({
      comment: 'edited outside',
      tags: ['blue'],
    });

    const drift = await ok(kl(['--format', 'json', 'drift', STATE]), 'kl drift');
    expect(JSON.parse(drift.stdout)).toEqual([
      {
        address: 'kltest_item.a',
        changed_paths: ['comment', 'tags'],
        detected_serial: (await currentState()).serial,
        refresh_run_id: expect.any(String),
      },
    ]);

    // The point of it all: a plan that skips refresh sees the drift kl recorded.
    const plan = await terraform(['plan', '-refresh=false', '-detailed-exitcode']);
    expect(plan.code).toBe(2);
    expect(plan.stdout).toContain('comment = "edited outside" -> "hello"');
  });

  it('a dry run reports drift and commits nothing', async () => {
    const before = await currentState();
    const bucket = before.resources.find((r) => r.type === 'kltest_bucket')!.instances[0];
    editObject('kltest_bucket', String(bucket.attributes.id), { size: 9 });

    const r = await kl(['refresh', STATE, '--dry-run', '--provider-search-path', mirror]);

    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/changed=1 .*version=none \(dry run\)/);
    expect(r.stdout).toContain('kltest_bucket.b');
    expect((await currentState()).serial).toBe(before.serial);
  });

  it('stores state written at schema version 0 upgraded to version 1', async () => {
    const doc = (await currentState()) as StateDoc & Record<string, unknown>;
    const instance = item(doc);
    const { comment, ...rest } = instance.attributes;
    instance.schema_version = 0;
    instance.attributes = { ...rest, note: comment };
    doc.serial += 1;
    const push = await fetch(`${kld.url}/v1/states/${STATE}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(doc),
    });
    expect(push.status).toBe(200);

    const r = await kl(['refresh', STATE, '--provider-search-path', mirror]);

    expect(r.code).toBe(0);
    const upgraded = item(await currentState());
    expect(upgraded.schema_version).toBe(1);
    expect(upgraded.attributes.comment).toBe('edited outside');
    expect(upgraded.attributes).not.toHaveProperty('note');
    expect(fs.readFileSync(rpcLog, 'utf8')).toMatch(/UpgradeResourceState/);
  });

  it('writes what terraform apply -refresh-only writes, attribute for attribute (upgrade included)', async () => {
    // Start from a v0 item and out-of-band edits to both objects.
    const doc = (await currentState()) as StateDoc & Record<string, unknown>;
    const instance = item(doc);
    const { comment, ...rest } = instance.attributes;
    instance.schema_version = 0;
    instance.attributes = { ...rest, note: comment };
    doc.serial += 1;
    expect(
      (
        await fetch(`${kld.url}/v1/states/${STATE}`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify(doc),
        })
      ).status,
    ).toBe(200);
    const bucket = doc.resources.find((r) => r.type === 'kltest_bucket')!.instances[0];
    editObject('kltest_bucket', String(bucket.attributes.id), { labels: { env: 'prod' } });
    editObject('kltest_item', String(instance.attributes.id), { comment: 'edited again' });

    // terraform's answer: the same state, same config, local backend, refresh-only apply.
    const tfDir = path.join(root, 'refresh-only');
    fs.mkdirSync(tfDir, { recursive: true });
    const config = fs
      .readFileSync(path.join(workDir, 'main.tf'), 'utf8')
      .replace(/\n {2}backend "http" \{[\s\S]*?\n {2}\}/, '');
    expect(config).not.toContain('backend');
    fs.writeFileSync(path.join(tfDir, 'main.tf'), config);
    fs.writeFileSync(path.join(tfDir, 'terraform.tfstate'), JSON.stringify(await currentState()));
    const inTf = (args: string[]) =>
      run(TERRAFORM, [...args, '-no-color', '-input=false'], { cwd: tfDir });
    await ok(inTf(['init']), 'terraform init (local copy)');
    await ok(inTf(['apply', '-refresh-only', '-auto-approve']), 'terraform apply -refresh-only');
    const theirs = JSON.parse(fs.readFileSync(path.join(tfDir, 'terraform.tfstate'), 'utf8'));

    // ours
    await ok(kl(['refresh', STATE, '--provider-search-path', mirror]), 'kl refresh');
    const ours = await currentState();

    const managed = (d: StateDoc) =>
      Object.fromEntries(
        d.resources
          .filter((r) => r.mode === 'managed')
          .map((r) => [
            `${r.type}.${r.name}`,
            r.instances.map((i) => ({
              schema_version: i.schema_version,
              attributes: i.attributes,
              sensitive_attributes: (i as { sensitive_attributes?: unknown }).sensitive_attributes,
            })),
          ]),
      );
    expect(managed(ours)).toEqual(managed(theirs as StateDoc));
    expect(item(ours).schema_version).toBe(1);
    expect(item(ours).attributes.comment).toBe('edited again');
  });

  it('reports a failure without committing, exit 1', async () => {
    const before = await currentState();
    // The provider reads a file it cannot parse: a per-resource error diagnostic.
    const id = String(item(before).attributes.id);
    fs.writeFileSync(objectPath('kltest_item', id), '{ not json');

    const r = await kl(['refresh', STATE, '--provider-search-path', mirror]);

    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/status=failed .*failed=1/);
    expect(r.stdout).toContain('failed:\n  kltest_item.a: ');
    expect((await currentState()).serial).toBe(before.serial);
    fs.writeFileSync(objectPath('kltest_item', id), JSON.stringify(item(before).attributes));
  });

  it("keeps an env value a provider's error repeats out of its output and out of what it sends kld", async () => {
    const before = await currentState();
    // A state_dir whose kltest_item is a file fails each read naming the path; a file as
    // state_dir fails Configure naming it.
    const unreadable = path.join(root, 'secret-unreadable-3f9c2a71');
    fs.mkdirSync(unreadable);
    fs.writeFileSync(path.join(unreadable, 'kltest_item'), '');
    fs.writeFileSync(path.join(unreadable, 'kltest_bucket'), '');
    const notADir = path.join(root, 'secret-file-8d41be06');
    fs.writeFileSync(notADir, '');
    for (const [secret, says] of [
      [unreadable, 'Cannot read the remote object: ***/kltest_'],
      [notADir, 'Invalid state_dir: *** is a file, not a directory'],
    ]) {
      const since = new Date();
      const r = await kl(['refresh', STATE, '--provider-search-path', mirror], {
        env: { KLTEST_OBJECTS: secret },
      });
      const json = await kl(
        ['--format', 'json', 'refresh', STATE, '--provider-search-path', mirror],
        {
          env: { KLTEST_OBJECTS: secret },
        },
      );

      expect([r.code, json.code]).toEqual([1, 1]);
      expect(r.stdout).toContain(says);
      const sent = await t.db.query<{ text: string }>(
        `SELECT e.type || e.data::text AS text FROM kl_events e
           JOIN refresh_runs r ON e.stream_id = 'refresh-' || r.run_id
          WHERE r.state_name = $1 AND r.started_at >= $2
         UNION ALL SELECT row_to_json(r)::text FROM refresh_runs r
          WHERE r.state_name = $1 AND r.started_at >= $2
         UNION ALL SELECT row_to_json(x)::text FROM refresh_results x JOIN refresh_runs r USING (run_id)
          WHERE r.state_name = $1 AND r.started_at >= $2`,
        [STATE, since],
      );
      const stored = sent.map((row) => row.text).join('\n');
      expect(stored).toContain('ResourceRefreshed');
      expect(stored).toContain(says);
      for (const text of [r.stdout, r.stderr, json.stdout, json.stderr, stored, kld.output()]) {
        expect(text).not.toContain(secret);
      }
    }
    expect((await currentState()).serial).toBe(before.serial);
  });

  it('drops an object deleted out of band and reports it gone', async () => {
    const before = await currentState();
    const bucket = before.resources.find((r) => r.type === 'kltest_bucket')!.instances[0];
    fs.rmSync(objectPath('kltest_bucket', String(bucket.attributes.id)));

    const r = await kl(['refresh', STATE, '--provider-search-path', mirror]);

    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/gone=1/);
    expect(r.stdout).toContain('gone:\n  kltest_bucket.b\n');
    const after = await currentState();
    expect(after.serial).toBe(before.serial + 1);
    expect(after.resources.map((x) => x.type)).not.toContain('kltest_bucket');
  });

  it('names a missing env variable and starts no provider', async () => {
    fs.writeFileSync(rpcLog, '');
    const r = await kl(['refresh', STATE, '--provider-search-path', mirror], {
      env: { KLTEST_OBJECTS: undefined },
    });

    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/KLTEST_OBJECTS, which is not set/);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(fs.readFileSync(rpcLog, 'utf8')).toBe('');
    expect(kltestProcesses()).toEqual([]);
  });

  it('refuses while terraform holds the lock, naming the holder', async () => {
    const lock = {
      ID: 'held-by-test',
      Operation: 'OperationTypeApply',
      Info: '',
      Who: 'carol@laptop',
      Version: '1.11.4',
      Created: new Date().toISOString(),
      Path: '',
    };
    const url = `${kld.url}/v1/states/${STATE}`;
    expect(
      (
        await fetch(url, {
          method: 'LOCK',
          headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify(lock),
        })
      ).status,
    ).toBe(200);
    try {
      fs.writeFileSync(rpcLog, '');
      const r = await kl(['refresh', STATE, '--provider-search-path', mirror]);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(
        'locked by carol@laptop (lock ID held-by-test, operation OperationTypeApply',
      );
      // A provider started while the lock was asked for is gone, never configured.
      expect(fs.readFileSync(rpcLog, 'utf8')).not.toMatch(/ConfigureProvider|ReadResource/);
      expect(kltestProcesses()).toEqual([]);
    } finally {
      await fetch(url, {
        method: 'UNLOCK',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify(lock),
      });
    }
  });

  it('ends within 5 s of SIGINT during a slow read, stopping the provider and leaving none behind', async () => {
    const before = await currentState();
    fs.writeFileSync(rpcLog, '');
    let signalledAt = 0;

    const r = await kl(['refresh', STATE, '--provider-search-path', mirror], {
      env: { KLTEST_READ_DELAY_MS: '60000' },
      onStart: (child) => {
        const poll = setInterval(() => {
          if (/ReadResource/.test(fs.readFileSync(rpcLog, 'utf8'))) {
            clearInterval(poll);
            signalledAt = Date.now();
            child.kill('SIGINT');
          }
        }, 50);
        child.on('close', () => clearInterval(poll));
      },
    });

    const elapsed = Date.now() - signalledAt;
    expect(signalledAt).toBeGreaterThan(0);
    expect(elapsed).toBeLessThan(5_000);
    expect(r.code).toBe(130);
    expect(fs.readFileSync(rpcLog, 'utf8')).toMatch(/StopProvider/);
    expect(kltestProcesses()).toEqual([]);
    expect((await currentState()).serial).toBe(before.serial);

    // The lock was released: terraform can lock the state again.
    const plan = await terraform(['plan', '-refresh=false']);
    expect(plan.code).toBe(0);
  });

  it('is refreshed by kld itself every KL_REFRESH_EVERY, with the provider found on the kld host', async () => {
    const id = String(item(await currentState()).attributes.id);
    editObject('kltest_item', id, { comment: 'seen by the scheduler' });
    const since = new Date(Date.now() - 1000);
    const runsOf = async () =>
      t.db.query<{ status: string; changed: number; actor: string }>(
        `SELECT status, changed, actor FROM refresh_runs WHERE state_name = $1 AND started_at > $2
          ORDER BY started_at`,
        [STATE, since],
      );
    const scheduled = await startKld({
      KL_DATABASE_URL: t.url,
      KL_REFRESH_EVERY: '10s',
      KL_REFRESH_STATES: STATE,
      KL_PROVIDER_PATH: mirror,
      KLTEST_OBJECTS: objectsDir,
      KL_REFRESH_ENV_ALLOW: 'KLTEST_OBJECTS',
    });
    try {
      const deadline = Date.now() + 30_000;
      let runs = await runsOf();
      while (!runs.some((r) => r.status === 'succeeded') && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 500));
        runs = await runsOf();
      }
      expect(runs[0]).toMatchObject({ status: 'succeeded', changed: 1, actor: 'kld-scheduler' });
      expect(item(await currentState()).attributes.comment).toBe('seen by the scheduler');
    } finally {
      expect((await scheduled.stop()).code).toBe(0);
    }
    expect(kltestProcesses()).toEqual([]);
  });
});
