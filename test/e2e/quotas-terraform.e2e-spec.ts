import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { bootstrapToken } from '../support/auth';
import { KL, KldProcess, startKld } from '../support/kld-process';
import { TERRAFORM, Terraform } from '../support/terraform-run';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/**
 * Quotas with real terraform: a commit over the hard limit is stored and the
 * overrun recorded; the next apply cannot lock (terraform prints why), plans
 * still work; `kl quota check --tf-plan` and `kl plan` judge a plan before it
 * is applied; once an admin raises the limit, apply works again.
 */

jest.setTimeout(300_000);

let root: string;
let tfrc: string;
let t: TestDatabase;
let kld: KldProcess;
let tf: Terraform;
let admin: string;
let writer: { name: string; secret: string };
const team = `q${randomUUID().slice(0, 6)}`;
const state = `${team}/app`;

function kl(args: string[], options: { token?: string; cwd?: string } = {}) {
  const r = spawnSync(process.execPath, [KL, ...args], {
    encoding: 'utf8',
    cwd: options.cwd,
    timeout: 180_000,
    env: {
      ...Object.fromEntries(
        Object.entries(process.env).filter(([k]) => !k.startsWith('TF_') && !k.startsWith('KL_')),
      ),
      KL_SERVER_URL: kld.url,
      KL_TOKEN: options.token ?? admin,
      KL_TERRAFORM: TERRAFORM,
      TF_CLI_CONFIG_FILE: tfrc,
      CHECKPOINT_DISABLE: '1',
    },
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

const as = (token: string) => ({ TF_HTTP_USERNAME: 'alice', TF_HTTP_PASSWORD: token });

/** `n` terraform_data resources and one data source (not counted), n kept in a tfvars file. */
function configure(dir: string, n: number): void {
  fs.writeFileSync(
    path.join(dir, 'main.tf'),
    [
      'variable "n" {',
      '  type = number',
      '}',
      'resource "terraform_data" "r" {',
      '  count = var.n',
      '  input = count.index',
      '}',
      'data "terraform_remote_state" "other" {',
      '  backend = "local"',
      '  config = { path = "${path.module}/other.tfstate" }',
      '}',
      '',
    ].join('\n'),
  );
  fs.writeFileSync(path.join(dir, 'n.auto.tfvars'), `n = ${n}\n`);
  fs.writeFileSync(
    path.join(dir, 'other.tfstate'),
    JSON.stringify({ version: 4, serial: 1, lineage: 'other', outputs: {}, resources: [] }),
  );
}

function usage() {
  const r = kl(['quota', state, '--format', 'json'], { token: writer.secret });
  expect(r).toMatchObject({ code: 0 });
  return JSON.parse(r.stdout) as {
    state: string;
    resources: number;
    status: string;
    headroom: number | null;
    quota: { glob: string; max_resources: number } | null;
    last_overrun: { version: number; level: string; limit: number; resources: number } | null;
  }[];
}

let dir: string;

beforeAll(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-quota-tf-'));
  tfrc = path.join(root, 'terraformrc.hcl');
  tf = new Terraform(root);
  t = await createTestDatabase('kl_quota_tf');
  const boot = bootstrapToken(t.url, 'root', ['admin', 'write:*', 'query']);
  expect(boot.code).toBe(0);
  admin = boot.secret;
  kld = await startKld({ KL_DATABASE_URL: t.url, KL_AUTH: 'on' });
  const name = `w-${randomUUID().slice(0, 6)}`;
  const created = kl(['token', 'create', '--name', name, '--scope', `write:${team}/*`]);
  expect(created.code).toBe(0);
  writer = { name, secret: created.stdout.trim() };
  dir = fs.mkdtempSync(path.join(root, 'mod-'));
  expect(kl(['backend-config', state, '--dir', dir]).code).toBe(0);
});

afterAll(async () => {
  tf?.killAll();
  await kld?.stop();
  await t?.drop();
  if (root) fs.rmSync(root, { recursive: true, force: true });
});

it('only admin tokens set or remove quotas; bad limits are refused with one line', () => {
  let r = kl(['quota', 'set', `${team}/*`, '--max-resources', '2'], { token: writer.secret });
  expect(r.code).toBe(1);
  expect(r.stderr).toMatch(/^kl: .*needs the admin scope.*\n$/);
  r = kl(['quota', 'set', `${team}/*`, '--max-resources', '0']);
  expect(r).toMatchObject({ code: 1 });
  expect(r.stderr).toBe('kl: --max-resources must be a whole number from 1 to 1000000000, got 0\n');
  r = kl(['quota', 'set', `${team}/*`, '--max-resources', '3', '--soft', '3']);
  expect(r.code).toBe(1);
  expect(r.stderr).toContain('--soft (3) must be below --max-resources (3)');
  r = kl(['quota', 'set', `${team}/*`, '--max-resources', 'lots']);
  expect(r.code).toBe(2);
  expect(r.stderr).toBe('kl: --max-resources must be a whole number, got "lots"\n');
  r = kl(['quota', 'rm', `${team}/*`]);
  expect(r.code).toBe(1);
  expect(r.stderr).toContain(`no quota on "${team}/*"`);
  // None of that changed anything.
  expect(JSON.parse(kl(['quota', 'rules', '--format', 'json']).stdout)).toEqual([]);
});

it('an apply over the hard limit is stored and the overrun shown; the next apply cannot lock', async () => {
  expect(kl(['quota', 'set', `${team}/*`, '--max-resources', '2', '--soft', '1']).code).toBe(0);
  configure(dir, 3);
  let r = await tf.run(dir, ['init', '-no-color'], as(writer.secret));
  expect(r).toMatchObject({ code: 0 });
  r = await tf.run(dir, ['apply', '-auto-approve', '-no-color'], as(writer.secret));
  expect(r.out).toContain('Apply complete! Resources: 3 added');
  expect(r.code).toBe(0);

  // 3 terraform_data counted; the data source is not.
  expect(usage()).toEqual([
    expect.objectContaining({
      state,
      resources: 3,
      status: 'hard',
      headroom: -1,
      quota: expect.objectContaining({ glob: `${team}/*`, max_resources: 2 }),
      last_overrun: expect.objectContaining({ version: 1, level: 'hard', limit: 2, resources: 3 }),
    }),
  ]);
  const listed = JSON.parse(kl(['states', '--format', 'json'], { token: writer.secret }).stdout);
  expect(listed).toEqual([expect.objectContaining({ name: state, over_quota: 'hard: 3 > 2' })]);
  const table = kl(['quota'], { token: writer.secret });
  expect(table.stdout).toContain(state);
  expect(table.stdout).toContain('version 1: 3 > hard 2');
  const sql = 'SELECT state_name, version, level, resource_count FROM quota_overruns';
  const rows = kl(['query', '--format', 'json', sql], { token: admin });
  expect(JSON.parse(rows.stdout)).toEqual([
    { state_name: state, version: 1, level: 'hard', resource_count: 3 },
  ]);
  // The SQL surface shows overruns of readable states only.
  for (const [glob, expected] of [
    [`${team}/*`, 1],
    ['elsewhere/*', 0],
  ] as const) {
    const name = `q-${randomUUID().slice(0, 6)}`;
    const token = kl([
      'token',
      'create',
      '--name',
      name,
      '--scope',
      'query',
      '--scope',
      `read:${glob}`,
    ]);
    const seen = kl(['query', '--format', 'json', sql], { token: token.stdout.trim() });
    expect(JSON.parse(seen.stdout)).toHaveLength(expected);
  }

  configure(dir, 4);
  r = await tf.run(
    dir,
    ['apply', '-auto-approve', '-no-color', '-lock-timeout=0s'],
    as(writer.secret),
  );
  expect(r.code).toBe(1);
  expect(r.out).toContain('Error acquiring the state lock');
  // Terraform prints the refusal's ID (wrapped); the Lock Info it prints after that is its own.
  expect(r.out.replace(/\s+/g, ' ')).toContain(
    `HTTP remote state already locked: ID=quota exceeded: state ${state} holds 3 resources, ` +
      `over the hard limit 2 of quota ${team}/*; plans still work, an admin can raise it (kl quota set)`,
  );
  // Nothing was written, and no lock is left behind.
  expect(usage()[0]).toMatchObject({ resources: 3, last_overrun: { version: 1 } });
  expect(JSON.parse(kl(['locks', '--format', 'json']).stdout)).toEqual([]);

  // Plans still lock and work.
  r = await tf.run(dir, ['plan', '-no-color', '-out=plan.tfplan'], as(writer.secret));
  expect(r.out).toContain('Plan: 1 to add, 0 to change, 0 to destroy');
  expect(r.code).toBe(0);
});

it('kl quota check judges a plan (JSON or plan file) by what it creates and deletes', async () => {
  const shown = await tf.run(dir, ['show', '-json', 'plan.tfplan'], as(writer.secret));
  expect(shown.code).toBe(0);
  const json = path.join(dir, 'plan.json');
  fs.writeFileSync(json, shown.out);
  for (const file of [json, path.join(dir, 'plan.tfplan')]) {
    const r = kl(['quota', 'check', '--tf-plan', file], { token: writer.secret, cwd: dir });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      `kl: quota exceeded: state ${state} would hold 4 resources (now 3, +1), over the hard limit 2 of quota ${team}/*\n`,
    );
  }
  const bad = kl(['quota', 'check', '--tf-plan', path.join(dir, 'main.tf')], { cwd: dir });
  expect(bad.code).not.toBe(0);
  expect(bad.code).not.toBe(2);
  expect(bad.stderr.split('\n')).toHaveLength(2);
});

it('kl plan preflights: over the hard limit exit 2 and no plan file; over the soft one a warning', () => {
  const out = path.join(root, 'kl-plan.json');
  let r = kl(['plan', dir, '--state', state, '-o', out], { token: writer.secret, cwd: dir });
  expect(r.stderr).toContain(`kl: quota exceeded: state ${state} would hold 4 resources`);
  expect(r.code).toBe(2);
  expect(fs.existsSync(out)).toBe(false);

  // A plan that creates nothing is refused too while the state is over the hard limit.
  r = kl(['plan', dir, '--state', state, '-o', out, '--target', 'terraform_data.r[0]'], {
    token: writer.secret,
    cwd: dir,
  });
  expect(r.stderr).toContain(
    `kl: quota exceeded: state ${state} would hold 3 resources (now 3, +0), over the hard limit 2`,
  );
  expect(r.code).toBe(2);
  expect(fs.existsSync(out)).toBe(false);

  // The way out: an admin raises the limit.
  expect(kl(['quota', 'set', `${team}/*`, '--max-resources', '10', '--soft', '3']).code).toBe(0);
  r = kl(['plan', dir, '--state', state, '-o', out], { token: writer.secret, cwd: dir });
  expect(r.code).toBe(0);
  expect(r.stderr).toContain(
    `kl: warning: state ${state} would hold 4 resources (now 3, +1), over the soft limit 3`,
  );
  expect(fs.existsSync(out)).toBe(true);
  r = kl(['quota', 'check', '--tf-plan', path.join(dir, 'plan.tfplan')], {
    token: writer.secret,
    cwd: dir,
  });
  expect(r.code).toBe(0);
  expect(r.stderr).toContain('kl: warning:');
});

it('after the admin raised the limit, terraform apply locks and applies again', async () => {
  const r = await tf.run(dir, ['apply', '-auto-approve', '-no-color'], as(writer.secret));
  expect(r.out).toContain('Apply complete! Resources: 1 added');
  expect(r.code).toBe(0);
  const listed = JSON.parse(kl(['states', '--format', 'json'], { token: writer.secret }).stdout);
  expect(listed[0].over_quota).toBe('soft: 4 > 3');
  expect(usage()[0]).toMatchObject({
    resources: 4,
    status: 'soft',
    headroom: 6,
    last_overrun: { version: 2, level: 'soft', limit: 3, resources: 4 },
  });
});
