import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { ChildRunner, ok, Run } from '../support/child-runner';
import { KL, KldProcess, startKld } from '../support/kld-process';
import { launches, launchRecordingMirror } from '../support/provider-launches';
import {
  awsCliEnv,
  awsVersionIn,
  findTerraformMirror,
  Moto,
  motoEndpointEnv,
  onPath,
  pidAlive,
  processesUnder,
  startMoto,
  writeMirrorCliConfig,
} from '../support/terraform-aws';
import { PlannedChange, plannedChanges } from '../support/terraform-run';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/**
 * ADR 0005's acceptance test with the real AWS provider (protocol 5) against
 * moto: terraform applies a bucket, its versioning and two SSM parameters
 * through kld's http backend; the versioning is suspended and one parameter
 * overwritten out of band; `kl refresh` finds exactly that drift, records it
 * (drift view, `kl drift`, lifecycles, refresh_runs), and afterwards
 * `terraform plan -refresh=false` plans exactly the changes a refreshing
 * `terraform plan` planned. A dry run commits nothing. No process is left.
 *
 * Protocol 6, schema upgrades and SIGINT are covered by refresh-kltest.
 */

// Each terraform command with the AWS provider starts it up to 3 times: several seconds each.
jest.setTimeout(300_000);

const TERRAFORM = process.env.KL_TEST_TERRAFORM ?? 'terraform';
const STATE = 'e2e/refresh-aws';
const AWS_SOURCE = 'registry.terraform.io/hashicorp/aws';
const BUCKET = 'kl-refresh-e2e-bucket';
const DRIFTED_PARAM = '/kl-refresh-e2e/drifted';
const QUIET_PARAM = '/kl-refresh-e2e/quiet';
const COMMAND_TIMEOUT_MS = 120_000;

const BUCKET_ADDR = 'aws_s3_bucket.b';
const VERSIONING_ADDR = 'aws_s3_bucket_versioning.b';
const DRIFTED_ADDR = 'aws_ssm_parameter.drifted';
const QUIET_ADDR = 'aws_ssm_parameter.quiet';

interface StateDoc {
  serial: number;
  lineage: string;
  resources: {
    mode: string;
    type: string;
    name: string;
    instances: { attributes: Record<string, unknown> }[];
  }[];
}

interface RefreshJson {
  run_id: string;
  status: string;
  dry_run: boolean;
  checked: number;
  changed: number;
  normalized: number;
  gone: number;
  failed: number;
  skipped: number;
  drifted: string[];
  normalized_addresses: string[];
  from_version: number;
  to_version: number | null;
}

let root: string;
let workDir: string;
let mirror: string;
let env: NodeJS.ProcessEnv;
let moto: Moto | undefined;
let t: TestDatabase | undefined;
let kld: KldProcess | undefined;
const runner = new ChildRunner(() => ({ cwd: workDir, env }), COMMAND_TIMEOUT_MS);
const timings: Record<string, number> = {};

async function run(
  command: string,
  args: string[],
  options: { env?: NodeJS.ProcessEnv; label?: string } = {},
): Promise<Run> {
  const r = await runner.run(command, args, { env: options.env });
  if (options.label) timings[options.label] = r.ms;
  return r;
}

const terraform = (args: string[], label?: string) =>
  run(TERRAFORM, [...args, '-no-color', '-input=false'], { label, env: motoEndpointEnv(moto!) });
const kl = (args: string[], label?: string) =>
  run(process.execPath, [KL, '--server', kld!.url, ...args], { label });

function awsCli(...args: string[]): string {
  return execFileSync('aws', ['--endpoint-url', moto!.endpoint, ...args], {
    env: { ...env, ...awsCliEnv() },
    encoding: 'utf8',
  });
}

async function currentState(): Promise<StateDoc> {
  const res = await fetch(`${kld!.url}/v1/states/${STATE}`);
  expect(res.status).toBe(200);
  return (await res.json()) as StateDoc;
}

async function query<T = Record<string, unknown>>(sql: string, ...params: string[]): Promise<T[]> {
  const args = ['--format', 'json', 'query', sql];
  for (const p of params) args.push('-p', p);
  return JSON.parse((await ok(kl(args), `kl query ${sql}`)).stdout) as T[];
}

/** `terraform plan -json`: the changes it planned. */
async function plan(flags: string[], label: string): Promise<PlannedChange[]> {
  const args = ['plan', '-json', ...flags];
  return plannedChanges((await ok(terraform(args, label), `terraform ${args.join(' ')}`)).stdout);
}

interface ShownPlan {
  changes: PlannedChange[];
  /** The `before` value terraform planned from, per address (what it believes the objects are). */
  priorObjects: Record<string, unknown>;
}

/** `plan` saved to `file`, and what `terraform show -json` says it planned from. */
async function planAndShow(file: string, flags: string[], label: string): Promise<ShownPlan> {
  const changes = await plan([`-out=${file}`, ...flags], label);
  const shown = await ok(
    run(TERRAFORM, ['show', '-json', '-no-color', file], { label: `show ${file}` }),
    `terraform show -json ${file}`,
  );
  const json = JSON.parse(shown.stdout) as {
    resource_changes?: { address: string; change: { before: unknown } }[];
  };
  const all = json.resource_changes ?? [];
  return {
    changes,
    priorObjects: Object.fromEntries(all.map((c) => [c.address, c.change.before])),
  };
}

function mainTf(quietDescription: string): string {
  const address = `${kld!.url}/v1/states/${STATE}`;
  return `terraform {
  required_providers {
    aws = { source = "hashicorp/aws", version = "5.100.0" }
  }
  backend "http" {
    address        = "${address}"
    lock_address   = "${address}"
    unlock_address = "${address}"
    lock_method    = "LOCK"
    unlock_method  = "UNLOCK"
  }
}

# The endpoints come from AWS_ENDPOINT_URL (motoEndpointEnv says why).
provider "aws" {
  access_key                  = "test"
  secret_key                  = "test"
  region                      = "us-east-1"
  skip_credentials_validation = true
  skip_requesting_account_id  = true
  skip_metadata_api_check     = true
  s3_use_path_style           = true
}

resource "aws_s3_bucket" "b" {
  bucket = "${BUCKET}"
}

resource "aws_s3_bucket_versioning" "b" {
  bucket = aws_s3_bucket.b.id
  versioning_configuration {
    status = "Enabled"
  }
}

resource "aws_ssm_parameter" "drifted" {
  name  = "${DRIFTED_PARAM}"
  type  = "String"
  value = "v1"
}

resource "aws_ssm_parameter" "quiet" {
  name        = "${QUIET_PARAM}"
  type        = "String"
  value       = "steady"
  description = "${quietDescription}"
}
`;
}

beforeAll(async () => {
  const probe = spawnSync(TERRAFORM, ['version'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) {
    throw new Error('terraform (1.11.x) must be on PATH for this suite (or set KL_TEST_TERRAFORM)');
  }
  onPath('aws');
  mirror = findTerraformMirror();
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-refresh-aws-'));
  workDir = path.join(root, 'work');
  fs.mkdirSync(workDir);
  const cliConfig = path.join(root, 'terraformrc');
  writeMirrorCliConfig(cliConfig, mirror);
  const inherited = Object.fromEntries(
    Object.entries(process.env).filter(
      ([k]) => !k.startsWith('TF_') && !k.startsWith('KL_') && !k.startsWith('AWS_'),
    ),
  );
  env = {
    ...inherited,
    TF_CLI_CONFIG_FILE: cliConfig,
    CHECKPOINT_DISABLE: '1',
    TF_IN_AUTOMATION: '1',
    // Read by kl refresh through the stored {"env": …} references, never stored.
    AWS_ACCESS_KEY_ID: 'test',
    AWS_SECRET_ACCESS_KEY: 'test',
    AWS_EC2_METADATA_DISABLED: 'true',
  };

  moto = await startMoto();
  t = await createTestDatabase('kl_refresh_aws');
  kld = await startKld({ KL_DATABASE_URL: t.url });

  fs.writeFileSync(path.join(workDir, 'main.tf'), mainTf('untouched'));
  await ok(terraform(['init'], 'init'), 'terraform init');
  await ok(terraform(['apply', '-auto-approve'], 'apply'), 'terraform apply');

  // The provider block of main.tf with the endpoints terraform has from its environment, as kl
  // refresh's Configure needs it.
  const config = path.join(root, 'aws.json');
  const e = moto.endpoint;
  fs.writeFileSync(
    config,
    JSON.stringify({
      access_key: { env: 'AWS_ACCESS_KEY_ID' },
      secret_key: { env: 'AWS_SECRET_ACCESS_KEY' },
      region: 'us-east-1',
      skip_credentials_validation: true,
      skip_requesting_account_id: true,
      skip_metadata_api_check: true,
      s3_use_path_style: true,
      endpoints: [{ s3: e, ssm: e, sts: e, iam: e }],
    }),
  );
  await ok(
    kl(['provider', 'configure', STATE, 'hashicorp/aws', '--from-json', config]),
    'kl provider configure',
  );
});

afterAll(async () => {
  runner.killAll();
  await kld?.stop();
  await moto?.stop();
  await t?.drop();
  const leftovers = root ? processesUnder(root, 'terraform-provider-aws') : [];
  for (const pid of leftovers) process.kill(pid, 'SIGKILL');
  if (root) fs.rmSync(root, { recursive: true, force: true });
  // Every process this suite started is gone: moto, kld, and any provider.
  expect(moto && pidAlive(moto.pid)).toBeFalsy();
  expect(kld && kld.child.pid !== undefined && pidAlive(kld.child.pid)).toBeFalsy();
  expect(leftovers).toEqual([]);
  if (Object.keys(timings).length > 0) {
    console.log(`refresh-aws e2e timings (ms): ${JSON.stringify(timings)}`);
  }
});

describe('kl refresh with the AWS provider against moto (ADR 0005 acceptance)', () => {
  let refreshingPlan: ShownPlan;
  let stalePlan: PlannedChange[];
  let appliedSerial: number;
  let appliedVersion: number;
  let report: RefreshJson;

  it('stores the provider config with env references, never the secrets', async () => {
    const stored = (
      JSON.parse(
        (
          await ok(
            kl(['--format', 'json', 'provider', 'get', STATE, 'hashicorp/aws']),
            'kl provider get',
          )
        ).stdout,
      ) as { config: Record<string, unknown> }
    ).config;
    expect(stored).toMatchObject({
      access_key: { env: 'AWS_ACCESS_KEY_ID' },
      secret_key: { env: 'AWS_SECRET_ACCESS_KEY' },
      region: 'us-east-1',
    });
    expect(JSON.stringify(stored)).not.toContain('"test"');
    const list = await ok(kl(['--format', 'json', 'provider', 'list', STATE]), 'kl provider list');
    expect(JSON.parse(list.stdout)).toEqual([
      expect.objectContaining({ source: AWS_SOURCE, alias: null }),
    ]);
  });

  it('right after a plain apply, calls no untouched resource drifted: tags null → {} is normalized', async () => {
    const before = await currentState();
    const r = await kl(['--format', 'json', 'refresh', STATE], 'kl refresh after apply');
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const first = JSON.parse(r.stdout) as RefreshJson;
    expect(first).toMatchObject({
      status: 'succeeded',
      checked: 4,
      // The bucket really did change after its create: the versioning resource enabled it.
      changed: 1,
      drifted: [BUCKET_ADDR],
      normalized: 2,
      normalized_addresses: [DRIFTED_ADDR, QUIET_ADDR],
      failed: 0,
      skipped: 0,
    });
    // Stored as the provider read it, as terraform's own refresh would store it.
    const after = await currentState();
    expect(after.serial).toBe(before.serial + 1);
    const tagsOf = (doc: StateDoc, name: string) =>
      doc.resources.find((x) => x.type === 'aws_ssm_parameter' && x.name === name)!.instances[0]
        .attributes.tags;
    expect(tagsOf(before, 'quiet')).toBeNull();
    expect(tagsOf(after, 'quiet')).toEqual({});

    const drift = JSON.parse(
      (await ok(kl(['--format', 'json', 'drift', STATE]), 'kl drift')).stdout,
    ) as { address: string; changed_paths: string[] }[];
    expect(drift.map((d) => [d.address, d.changed_paths])).toEqual([
      [BUCKET_ADDR, ['versioning[0].enabled']],
    ]);
    expect(
      await query(
        `SELECT address, outcome, changed_paths FROM refresh_results
          WHERE run_id = $1 AND outcome = 'normalized' ORDER BY address`,
        first.run_id,
      ),
    ).toEqual([
      { address: DRIFTED_ADDR, outcome: 'normalized', changed_paths: ['tags'] },
      { address: QUIET_ADDR, outcome: 'normalized', changed_paths: ['tags'] },
    ]);
    expect(
      await query('SELECT changed, normalized FROM refresh_runs WHERE run_id = $1', first.run_id),
    ).toEqual([{ changed: 1, normalized: 2 }]);
    // And terraform agrees nothing needs doing, without refreshing itself.
    const stale = await terraform(['plan', '-refresh=false', '-detailed-exitcode'], 'plan after');
    expect(stale.code).toBe(0);
  });

  it('plans drift found by a refreshing terraform plan, after out-of-band changes', async () => {
    const before = await currentState();
    appliedSerial = before.serial;
    const [{ version }] = await query<{ version: number }>(
      'SELECT current_version AS version FROM states WHERE name = $1 AND deleted_at IS NULL',
      STATE,
    );
    appliedVersion = version;

    awsCli(
      's3api',
      'put-bucket-versioning',
      '--bucket',
      BUCKET,
      '--versioning-configuration',
      'Status=Suspended',
    );
    awsCli(
      'ssm',
      'put-parameter',
      '--name',
      DRIFTED_PARAM,
      '--value',
      'v2-changed-out-of-band',
      '--type',
      'String',
      '--overwrite',
    );
    // A desired-state change in HCL too, so the plans compare more than drift (ADR 0005).
    fs.writeFileSync(path.join(workDir, 'main.tf'), mainTf('changed in HCL'));

    refreshingPlan = await planAndShow('before.tfplan', [], 'plan');
    expect(refreshingPlan.changes).toEqual([
      { address: VERSIONING_ADDR, action: 'update' },
      { address: DRIFTED_ADDR, action: 'update' },
      { address: QUIET_ADDR, action: 'update' },
    ]);

    // The control: without a refresh terraform believes the stale state and sees only the HCL change.
    stalePlan = await plan(['-refresh=false'], 'plan -refresh=false (stale)');
    expect(stalePlan).toEqual([{ address: QUIET_ADDR, action: 'update' }]);
    // Plans never write state.
    expect((await currentState()).serial).toBe(appliedSerial);
  });

  it('kl refresh --dry-run reports the drift and commits nothing', async () => {
    const r = await kl(['--format', 'json', 'refresh', STATE, '--dry-run'], 'kl refresh --dry-run');
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const dry = JSON.parse(r.stdout) as RefreshJson;
    expect(dry).toMatchObject({
      status: 'succeeded',
      dry_run: true,
      checked: 4,
      changed: 3,
      gone: 0,
      failed: 0,
      drifted: [BUCKET_ADDR, VERSIONING_ADDR, DRIFTED_ADDR],
      from_version: appliedVersion,
      to_version: null,
    });

    expect((await currentState()).serial).toBe(appliedSerial);
    const versions = await query<{ n: number }>(
      `SELECT count(*)::int AS n FROM state_versions v JOIN states s USING (state_id)
        WHERE s.name = $1 AND s.deleted_at IS NULL AND v.version > $2`,
      STATE,
      String(appliedVersion),
    );
    expect(versions).toEqual([{ n: 0 }]);
    // kl drift still shows only what the refresh after the apply committed.
    const drift = await ok(kl(['--format', 'json', 'drift', STATE]), 'kl drift');
    expect(JSON.parse(drift.stdout)).toEqual([
      expect.objectContaining({
        address: BUCKET_ADDR,
        changed_paths: ['versioning[0].enabled'],
        detected_serial: appliedSerial,
      }),
    ]);
    const runs = await query(
      `SELECT status, dry_run, checked, changed, failed, to_version, to_serial
         FROM refresh_runs WHERE run_id = $1`,
      dry.run_id,
    );
    expect(runs).toEqual([
      {
        status: 'succeeded',
        dry_run: true,
        checked: 4,
        changed: 3,
        failed: 0,
        to_version: null,
        to_serial: null,
      },
    ]);
  });

  it('kl refresh finds exactly the drifted resources and commits the next serial', async () => {
    const r = await kl(['--format', 'json', 'refresh', STATE], 'kl refresh');
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    report = JSON.parse(r.stdout) as RefreshJson;
    expect(report).toMatchObject({
      status: 'succeeded',
      dry_run: false,
      checked: 4,
      changed: 3,
      gone: 0,
      failed: 0,
      // The bucket too: its computed `versioning` attribute follows the versioning resource.
      drifted: [BUCKET_ADDR, VERSIONING_ADDR, DRIFTED_ADDR],
      from_version: appliedVersion,
      to_version: appliedVersion + 1,
    });

    const after = await currentState();
    expect(after.serial).toBe(appliedSerial + 1);
    const attrs = (type: string, name: string) =>
      after.resources.find((x) => x.type === type && x.name === name)!.instances[0].attributes;
    expect(attrs('aws_ssm_parameter', 'drifted')).toMatchObject({
      value: 'v2-changed-out-of-band',
      version: 2,
    });
    expect(attrs('aws_ssm_parameter', 'quiet')).toMatchObject({ value: 'steady', version: 1 });
    expect(attrs('aws_s3_bucket_versioning', 'b').versioning_configuration).toEqual([
      expect.objectContaining({ status: 'Suspended' }),
    ]);
    expect(attrs('aws_s3_bucket', 'b').versioning).toEqual([
      expect.objectContaining({ enabled: false }),
    ]);
  });

  it('kl drift and current_resource_drift list exactly those three, with what changed', async () => {
    const serial = appliedSerial + 1;
    const drift = JSON.parse(
      (await ok(kl(['--format', 'json', 'drift', STATE]), 'kl drift')).stdout,
    ) as {
      address: string;
      changed_paths: string[];
      detected_serial: number;
      refresh_run_id: string;
    }[];
    expect(drift.map((d) => d.address).sort()).toEqual([
      BUCKET_ADDR,
      VERSIONING_ADDR,
      DRIFTED_ADDR,
    ]);
    for (const d of drift) {
      expect(d).toMatchObject({ detected_serial: serial, refresh_run_id: report.run_id });
    }
    const paths = Object.fromEntries(drift.map((d) => [d.address, d.changed_paths]));
    expect(paths[VERSIONING_ADDR]).toEqual(['versioning_configuration[0].status']);
    expect(paths[DRIFTED_ADDR]).toEqual(expect.arrayContaining(['value', 'version']));
    expect(paths[BUCKET_ADDR]).toEqual(expect.arrayContaining(['versioning[0].enabled']));

    const view = await query<{
      address: string;
      detected_serial: number;
      detected_version: number;
      refresh_run_id: string;
      was: string;
      now: string;
    }>(
      `SELECT address, detected_serial, detected_version, refresh_run_id,
              previous_attributes->>'value' AS was, current_attributes->>'value' AS now
         FROM current_resource_drift WHERE state_name = $1 ORDER BY address`,
      STATE,
    );
    expect(view.map((v) => v.address)).toEqual([BUCKET_ADDR, VERSIONING_ADDR, DRIFTED_ADDR]);
    for (const v of view) {
      expect(v).toMatchObject({
        detected_serial: serial,
        detected_version: report.to_version,
        refresh_run_id: report.run_id,
      });
    }
    expect(view.find((v) => v.address === DRIFTED_ADDR)).toMatchObject({
      was: 'v1',
      now: 'v2-changed-out-of-band',
    });
  });

  it('closes the old lifecycle of each drifted instance and opens a new one; the quiet one keeps its own', async () => {
    const rows = await query<{
      address: string;
      create_version: number;
      delete_version: number | null;
      create_serial: number;
      delete_serial: number | null;
    }>(
      `SELECT r.address, r.create_version, r.delete_version, r.create_serial, r.delete_serial
         FROM resources r JOIN states s USING (state_id)
        WHERE s.name = $1 AND s.deleted_at IS NULL
        ORDER BY r.address, r.create_version`,
      STATE,
    );
    const of = (address: string) =>
      rows.filter((r) => r.address === address).map(({ address: _a, ...rest }) => rest);
    const refreshed = report.to_version!;
    // The lifecycle alive at the version the refresh read from.
    const aliveAt = (address: string, v: number) =>
      of(address).filter(
        (l) => l.create_version <= v && (l.delete_version === null || l.delete_version > v),
      );
    for (const address of [BUCKET_ADDR, VERSIONING_ADDR, DRIFTED_ADDR]) {
      const [old] = aliveAt(address, appliedVersion);
      expect(old).toMatchObject({ delete_version: refreshed, delete_serial: appliedSerial + 1 });
      expect(of(address).filter((l) => l.delete_version === null)).toEqual([
        {
          create_version: refreshed,
          delete_version: null,
          create_serial: appliedSerial + 1,
          delete_serial: null,
        },
      ]);
    }
    const quiet = of(QUIET_ADDR);
    expect(aliveAt(QUIET_ADDR, appliedVersion)).toEqual(
      quiet.filter((l) => l.delete_version === null),
    );
    expect(
      quiet.filter((l) => l.delete_version === refreshed || l.create_version === refreshed),
    ).toEqual([]);
  });

  it('records the run in refresh_runs with its counts and the committed version', async () => {
    const runs = await query(
      `SELECT state_name, status, dry_run, checked, changed, failed, from_version, from_serial,
              to_version, to_serial, error_summary, finished_at IS NOT NULL AS finished
         FROM refresh_runs WHERE run_id = $1`,
      report.run_id,
    );
    expect(runs).toEqual([
      {
        state_name: STATE,
        status: 'succeeded',
        dry_run: false,
        checked: 4,
        changed: 3,
        failed: 0,
        from_version: appliedVersion,
        from_serial: appliedSerial,
        to_version: report.to_version,
        to_serial: appliedSerial + 1,
        error_summary: null,
        finished: true,
      },
    ]);
    const results = await query<{ address: string; outcome: string }>(
      'SELECT address, outcome FROM refresh_results WHERE run_id = $1 ORDER BY address',
      report.run_id,
    );
    expect(results).toEqual([
      { address: BUCKET_ADDR, outcome: 'drifted' },
      { address: VERSIONING_ADDR, outcome: 'drifted' },
      { address: DRIFTED_ADDR, outcome: 'drifted' },
      { address: QUIET_ADDR, outcome: 'unchanged' },
    ]);
  });

  it('terraform plan -refresh=false now plans exactly what the refreshing plan planned', async () => {
    const afterPlan = await planAndShow(
      'after.tfplan',
      ['-refresh=false'],
      'plan -refresh=false (after kl refresh)',
    );
    expect(afterPlan.changes).toEqual(refreshingPlan.changes);
    expect(afterPlan.changes).not.toEqual(stalePlan);
    // And from the same picture of the objects: kl's refresh read what terraform's read.
    expect(Object.keys(afterPlan.priorObjects)).toHaveLength(4);
    expect(afterPlan.priorObjects).toEqual(refreshingPlan.priorObjects);
  });

  it('leaves no provider process behind', () => {
    expect(processesUnder(root, 'terraform-provider-aws')).toEqual([]);
  });
});

describe('server-side refresh and the environment of kld', () => {
  const SERVER_STATE = 'e2e/refresh-aws-server';
  /** Whatever reaches this listener would have left the machine in real life. */
  const heard: { method: string; url: string; authorization: string }[] = [];
  let listener: http.Server;
  let attacker: string;
  let launchLog: string;
  let server: KldProcess | undefined;

  beforeAll(async () => {
    listener = http.createServer((req, res) => {
      heard.push({
        method: req.method ?? '',
        url: req.url ?? '',
        authorization: String(req.headers.authorization ?? ''),
      });
      req.resume();
      res.writeHead(400, { 'content-type': 'application/x-amz-json-1.1' });
      res.end(JSON.stringify({ __type: 'AccessDeniedException', message: 'test listener' }));
    });
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    attacker = `http://127.0.0.1:${(listener.address() as { port: number }).port}`;

    // kld finds the AWS provider through a wrapper that notes every launch.
    launchLog = path.join(root, 'kld-launches.log');
    const version = awsVersionIn(mirror);
    const platform = path.join(mirror, AWS_SOURCE, version, 'linux_amd64');
    const binary = fs.readdirSync(platform).find((f) => f.startsWith('terraform-provider-aws'))!;
    const wrapped = launchRecordingMirror({
      dir: path.join(root, 'kld-mirror'),
      source: AWS_SOURCE,
      version,
      binary: path.join(platform, binary),
      launchLog,
    });
    server = await startKld({
      KL_DATABASE_URL: t!.url,
      KL_PROVIDER_PATH: wrapped,
      KL_REFRESH_ENV_ALLOW: 'AWS_ACCESS_KEY_ID,AWS_SECRET_ACCESS_KEY',
      AWS_ACCESS_KEY_ID: 'test',
      AWS_SECRET_ACCESS_KEY: 'test',
      AWS_EC2_METADATA_DISABLED: 'true',
    });

    // The two SSM parameters, as a state of their own.
    const doc = (await currentState()) as StateDoc & Record<string, unknown>;
    const params = {
      ...doc,
      resources: doc.resources.filter((r) => r.type === 'aws_ssm_parameter'),
    };
    const put = await fetch(`${kld!.url}/v1/states/${SERVER_STATE}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(params),
    });
    expect(put.status).toBe(200);
  });

  afterAll(async () => {
    await server?.stop();
    await new Promise((resolve) => listener?.close(resolve));
  });

  async function configure(config: Record<string, unknown>): Promise<void> {
    const file = path.join(root, 'server-aws.json');
    fs.writeFileSync(
      file,
      JSON.stringify({
        region: 'us-east-1',
        skip_credentials_validation: true,
        skip_requesting_account_id: true,
        skip_metadata_api_check: true,
        max_retries: 1,
        ...config,
      }),
    );
    await ok(
      kl(['provider', 'configure', SERVER_STATE, 'hashicorp/aws', '--from-json', file]),
      'kl provider configure',
    );
  }

  const endpointsAt = (url: string) => [{ ssm: url, sts: url, s3: url, iam: url, sqs: url }];

  /** The report, or `{error}` when the refresh was refused. */
  async function serverRefresh(): Promise<{
    status: number;
    body: Partial<RefreshJson> & { error?: { code: string; message: string } };
  }> {
    const r = await fetch(`${server!.url}/v1/states/${SERVER_STATE}/refresh`, { method: 'POST' });
    return { status: r.status, body: (await r.json()) as Partial<RefreshJson> };
  }

  async function serial(): Promise<number> {
    const r = await fetch(`${kld!.url}/v1/states/${SERVER_STATE}`);
    return ((await r.json()) as { serial: number }).serial;
  }

  it('refuses a config that reads a variable the operator did not allow: 403, nothing sent, nothing started', async () => {
    const before = await serial();
    for (const [variable, why] of [
      ['KL_DATABASE_URL', "kld's own KL_* settings are never given to a provider"],
      ['HOME', 'lists in KL_REFRESH_ENV_ALLOW'],
    ]) {
      await configure({
        access_key: { env: variable },
        secret_key: 'anything',
        endpoints: endpointsAt(attacker),
      });
      const r = await serverRefresh();
      expect({ status: r.status, code: r.body.error?.code }).toEqual({
        status: 403,
        code: 'REFRESH.CONFIG_ENV_REFUSED',
      });
      expect(r.body.error!.message).toContain(
        `access_key refers to environment variable ${variable}, which this server may not read`,
      );
      expect(r.body.error!.message).toContain(why);
      expect(r.body.error!.message).not.toContain(t!.url);
    }
    expect(heard).toEqual([]);
    expect(launches(launchLog)).toBe(0);
    expect(await serial()).toBe(before);
    const runs = await query<{ status: string; to_version: number | null }>(
      'SELECT status, to_version FROM refresh_runs WHERE state_name = $1',
      SERVER_STATE,
    );
    expect(runs).toEqual([
      { status: 'failed', to_version: null },
      { status: 'failed', to_version: null },
    ]);
  });

  it('with allowed names, signs with them wherever the config points (who may write configs matters)', async () => {
    await configure({
      access_key: { env: 'AWS_ACCESS_KEY_ID' },
      secret_key: { env: 'AWS_SECRET_ACCESS_KEY' },
      endpoints: endpointsAt(attacker),
    });
    const r = await serverRefresh();
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ status: 'failed', failed: 2, to_version: null });
    // The refused case above was observable: this one did reach the listener.
    expect(heard.length).toBeGreaterThan(0);
    expect(heard[0].authorization).toContain('Credential=test/');
    expect(launches(launchLog)).toBe(1);
  });

  it('with allowed names and the right endpoints, refreshes and commits', async () => {
    const before = await serial();
    await configure({
      access_key: { env: 'AWS_ACCESS_KEY_ID' },
      secret_key: { env: 'AWS_SECRET_ACCESS_KEY' },
      endpoints: endpointsAt(moto!.endpoint),
    });
    const r = await serverRefresh();
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ status: 'succeeded', checked: 2, failed: 0 });
    expect(await serial()).toBe(before + 1);
    expect(launches(launchLog)).toBe(2);
  });

  it('leaves no provider process behind', () => {
    expect(processesUnder(root, 'terraform-provider-aws')).toEqual([]);
  });
});
