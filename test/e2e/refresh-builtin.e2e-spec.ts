import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ChildRunner, ok, Run } from '../support/child-runner';
import { kltestMirror, offlineTerraformEnv } from '../support/kltest-mirror';
import { KL, KldProcess, startKld } from '../support/kld-process';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/**
 * `kl refresh` on states holding terraform's built-in `terraform_data`,
 * written by a real terraform through kld's http backend. No plugin
 * implements terraform.io/builtin/terraform, so its instances are skipped
 * (and counted), never failed: a state of built-ins only refreshes with
 * exit 0 and commits nothing; next to a real provider's resources they are
 * kept as they are while the others are refreshed and committed.
 */

jest.setTimeout(180_000);

const TERRAFORM = process.env.KL_TEST_TERRAFORM ?? 'terraform';
const STATE = 'e2e/refresh-builtin';

interface StateDoc {
  serial: number;
  resources: { type: string; name: string; instances: Record<string, unknown>[] }[];
}

let root: string;
let workDir: string;
let mirror: string;
let env: NodeJS.ProcessEnv;
let t: TestDatabase;
let kld: KldProcess;
const runner = new ChildRunner(() => ({ cwd: workDir, env }), 90_000);

const terraform = (args: string[]): Promise<Run> =>
  runner.run(TERRAFORM, [...args, '-no-color', '-input=false']);
const kl = (args: string[]): Promise<Run> =>
  runner.run(process.execPath, [KL, '--server', kld.url, ...args]);

async function currentState(): Promise<StateDoc> {
  const res = await fetch(`${kld.url}/v1/states/${STATE}`);
  expect(res.status).toBe(200);
  return (await res.json()) as StateDoc;
}

async function lastRun(): Promise<Record<string, unknown>> {
  const runs = await t.db.query(
    `SELECT status, checked, changed, failed, normalized, skipped, to_version FROM refresh_runs
      WHERE state_name = $1 ORDER BY started_at DESC LIMIT 1`,
    [STATE],
  );
  return runs[0];
}

function mainTf(withKltest: boolean): string {
  const address = `${kld.url}/v1/states/${STATE}`;
  const kltest = withKltest
    ? `
provider "kltest" {
  state_dir = "${path.join(root, 'objects')}"
}

# A number beyond double precision: kept to the digit through the refresh's commit.
resource "terraform_data" "big" {
  input = 12345678901234567890
}

resource "kltest_bucket" "b" {
  name   = "bucket-next-to-builtins"
  size   = 2
  labels = { env = "dev" }
}
`
    : '';
  return `terraform {
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

resource "terraform_data" "d" {
  count = 3
  input = "value-\${count.index}"
}
${kltest}`;
}

beforeAll(async () => {
  const probe = spawnSync(TERRAFORM, ['version'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) {
    throw new Error('terraform (1.11.x) must be on PATH for this suite (or set KL_TEST_TERRAFORM)');
  }
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-refresh-builtin-'));
  workDir = path.join(root, 'work');
  for (const dir of [workDir, path.join(root, 'objects')]) fs.mkdirSync(dir, { recursive: true });
  const kltest = kltestMirror(root);
  mirror = kltest.mirror;
  env = {
    ...offlineTerraformEnv(),
    TF_CLI_CONFIG_FILE: kltest.cliConfig,
    KL_CACHE_DIR: path.join(root, 'cache'),
    KLTEST_OBJECTS: path.join(root, 'objects'),
  };
  t = await createTestDatabase('kl_refresh_builtin');
  kld = await startKld({ KL_DATABASE_URL: t.url });
  fs.writeFileSync(path.join(workDir, 'main.tf'), mainTf(false));
  await ok(terraform(['init']), 'terraform init');
  await ok(terraform(['apply', '-auto-approve']), 'terraform apply');
});

afterAll(async () => {
  runner.killAll();
  await kld?.stop();
  await t?.drop();
  if (root) fs.rmSync(root, { recursive: true, force: true });
});

describe('kl refresh and terraform built-in resources', () => {
  it('refreshes a state of terraform_data only: exit 0, all skipped, nothing committed', async () => {
    const before = await currentState();
    expect(before.resources.map((r) => r.type)).toEqual(['terraform_data']);

    const r = await kl(['refresh', STATE, '--provider-search-path', mirror]);

    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(
      /^status=succeeded checked=0 changed=0 normalized=0 gone=0 failed=0 skipped=3 version=none run=/,
    );
    expect(await currentState()).toEqual(before);
    expect(await lastRun()).toEqual({
      status: 'succeeded',
      checked: 0,
      changed: 0,
      failed: 0,
      normalized: 0,
      skipped: 3,
      to_version: null,
    });
    const results = await t.db.query<{ address: string; outcome: string }>(
      `SELECT address, outcome FROM refresh_results r JOIN refresh_runs USING (run_id)
        WHERE state_name = $1 ORDER BY address`,
      [STATE],
    );
    expect(results).toEqual(
      [0, 1, 2].map((i) => ({ address: `terraform_data.d[${i}]`, outcome: 'skipped' })),
    );
  });

  it('next to a provider-backed resource: refreshes that one, keeps the built-ins, commits', async () => {
    fs.writeFileSync(path.join(workDir, 'main.tf'), mainTf(true));
    await ok(terraform(['init']), 'terraform init (kltest)');
    await ok(terraform(['apply', '-auto-approve']), 'terraform apply (kltest)');
    const config = path.join(root, 'kltest.json');
    fs.writeFileSync(config, JSON.stringify({ state_dir: { env: 'KLTEST_OBJECTS' } }));
    await ok(
      kl(['provider', 'configure', STATE, 'kilolock/kltest', '--from-json', config]),
      'kl provider configure',
    );
    const before = await currentState();

    const r = await kl(['--format', 'json', 'refresh', STATE, '--provider-search-path', mirror]);

    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({
      status: 'succeeded',
      checked: 1,
      changed: 0,
      skipped: 4,
      failed: 0,
    });
    const after = await currentState();
    expect(after.serial).toBe(before.serial + 1);
    const builtIns = (doc: StateDoc) => doc.resources.filter((x) => x.type === 'terraform_data');
    expect(builtIns(after)).toEqual(builtIns(before));
    expect(await lastRun()).toMatchObject({ status: 'succeeded', checked: 1, skipped: 4 });
    const served = await (await fetch(`${kld.url}/v1/states/${STATE}`)).text();
    expect(served).toMatch(/"value": 12345678901234567890,/);

    // The committed state is what terraform itself holds: a plan without refresh plans nothing.
    const plan = await terraform(['plan', '-refresh=false', '-detailed-exitcode']);
    expect(plan.code).toBe(0);
  });
});
