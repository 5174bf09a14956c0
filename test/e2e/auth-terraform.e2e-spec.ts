import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { bootstrapToken } from '../support/auth';
import { KL, KldProcess, startKld } from '../support/kld-process';
import { Terraform } from '../support/terraform-run';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/**
 * Real terraform against kld with authentication on: the token travels as
 * the http backend's password (TF_HTTP_PASSWORD), the block comes from
 * `kl backend-config`, and what terraform prints on 401 and 403 is checked.
 */

jest.setTimeout(240_000);

let root: string;
let t: TestDatabase;
let kld: KldProcess;
let tf: Terraform;
let admin: string;
const state = `tf/${randomUUID().slice(0, 8)}`;

function kl(args: string[], token = admin) {
  return spawnSync(process.execPath, [KL, ...args], {
    encoding: 'utf8',
    env: { ...process.env, KL_SERVER_URL: kld.url, KL_TOKEN: token },
  });
}

function newToken(scopes: string[]): { name: string; secret: string } {
  const name = `tf-${randomUUID().slice(0, 8)}`;
  const r = kl(['token', 'create', '--name', name, ...scopes.flatMap((s) => ['--scope', s])]);
  if (r.status !== 0) throw new Error(`kl token create: ${r.stderr}`);
  return { name, secret: r.stdout.trim() };
}

/** A root module with one terraform_data, its backend block written by kl. */
function module(name: string, input: string): string {
  const dir = fs.mkdtempSync(path.join(root, 'mod-'));
  fs.writeFileSync(
    path.join(dir, 'main.tf'),
    `resource "terraform_data" "r" {\n  input = "${input}"\n}\n`,
  );
  const r = kl(['backend-config', name, '--dir', dir]);
  if (r.status !== 0) throw new Error(`kl backend-config: ${r.stderr}`);
  return dir;
}

const as = (token: string | null, user = 'alice'): Record<string, string> =>
  token === null ? {} : { TF_HTTP_USERNAME: user, TF_HTTP_PASSWORD: token };

beforeAll(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-auth-tf-'));
  tf = new Terraform(root);
  t = await createTestDatabase('kl_auth_tf');
  const boot = bootstrapToken(t.url, 'root', ['admin', 'write:*']);
  expect(boot.code).toBe(0);
  admin = boot.secret;
  kld = await startKld({ KL_DATABASE_URL: t.url, KL_AUTH: 'on' });
});

afterAll(async () => {
  tf?.killAll();
  await kld?.stop();
  await t?.drop();
  if (root) fs.rmSync(root, { recursive: true, force: true });
});

it('kl backend-config writes a block that names the state and no secret', () => {
  const dir = module(state, 'x');
  const block = fs.readFileSync(path.join(dir, 'kilolock_backend.tf'), 'utf8');
  expect(block).toContain(`address        = "${kld.url}/v1/states/${state}"`);
  expect(block).toContain('lock_method    = "LOCK"');
  expect(block).toContain('TF_HTTP_PASSWORD');
  expect(block).not.toContain(admin);
  expect(kl(['backend-config', state, '--dir', dir]).stderr).toContain('exists; --force');
});

it('a write token applies; a read token plans with -lock=false but cannot apply', async () => {
  const writer = newToken([`write:${state}`]);
  const reader = newToken([`read:${state}`]);
  const dir = module(state, 'one');
  let r = await tf.run(dir, ['init', '-no-color'], as(writer.secret));
  expect(r).toMatchObject({ code: 0 });
  r = await tf.run(dir, ['apply', '-auto-approve', '-no-color'], as(writer.secret));
  expect(r.out).toContain('Apply complete! Resources: 1 added');

  const history = JSON.parse(kl(['history', state, '--format', 'json']).stdout);
  expect(history.map((v: { actor: string }) => v.actor)).toEqual([`${writer.name} (alice)`]);

  fs.writeFileSync(
    path.join(dir, 'main.tf'),
    'resource "terraform_data" "r" {\n  input = "two"\n}\n',
  );
  r = await tf.run(dir, ['plan', '-lock=false', '-no-color'], as(reader.secret));
  expect(r.out).toContain('Plan: 0 to add, 1 to change, 0 to destroy');
  expect(r.code).toBe(0);
  r = await tf.run(dir, ['apply', '-auto-approve', '-no-color'], as(reader.secret));
  expect(r.code).toBe(1);
  expect(r.out).toContain('Error acquiring the state lock');
  expect(r.out).toContain('HTTP remote state endpoint invalid auth');
  // Nothing was written.
  expect(JSON.parse(kl(['history', state, '--format', 'json']).stdout)).toHaveLength(1);
});

it('without a token, or with a revoked one, terraform says the endpoint requires auth', async () => {
  const dir = module(state, 'one');
  let r = await tf.run(dir, ['init', '-no-color'], as(null));
  expect(r.code).toBe(1);
  expect(r.out).toContain('HTTP remote state endpoint requires auth');
  // Terraform sends basic auth only with a username: a password alone is no token.
  r = await tf.run(dir, ['init', '-no-color'], { TF_HTTP_PASSWORD: admin });
  expect(r.code).toBe(1);
  expect(r.out).toContain('HTTP remote state endpoint requires auth');
  const gone = newToken([`write:${state}`]);
  expect(kl(['token', 'revoke', gone.name]).status).toBe(0);
  r = await tf.run(dir, ['init', '-no-color'], as(gone.secret));
  expect(r.code).toBe(1);
  expect(r.out).toContain('HTTP remote state endpoint requires auth');
});

it("a team-a/* token cannot read or write team-b's state through terraform", async () => {
  const teamA = newToken(['write:team-a/*']);
  const dir = module(`team-b/${randomUUID().slice(0, 8)}`, 'b');
  const r = await tf.run(dir, ['init', '-no-color'], as(teamA.secret));
  expect(r.code).toBe(1);
  expect(r.out).toContain('HTTP remote state endpoint invalid auth');
});
