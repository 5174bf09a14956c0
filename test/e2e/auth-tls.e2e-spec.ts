import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { bootstrapToken } from '../support/auth';
import { httpsStatus, KL, KldProcess, startKld } from '../support/kld-process';
import { Terraform } from '../support/terraform-run';
import { makeTestCertificates } from '../support/test-certificates';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/**
 * HTTPS (KL_TLS_CERT/KL_TLS_KEY) and client certificates (KL_TLS_CLIENT_CA)
 * with terraform's own PEM settings; certificates are made here with openssl.
 */

jest.setTimeout(240_000);

let root: string;
let t: TestDatabase;
let tls: KldProcess;
let mtls: KldProcess;
let tf: Terraform;
let admin: string;
let pem: Record<string, string>;

function module(url: string, name: string): string {
  const dir = fs.mkdtempSync(path.join(root, 'mod-'));
  fs.writeFileSync(
    path.join(dir, 'main.tf'),
    'resource "terraform_data" "r" {\n  input = "x"\n}\n',
  );
  const r = spawnSync(process.execPath, [KL, 'backend-config', name, '--dir', dir], {
    encoding: 'utf8',
    env: { ...process.env, KL_SERVER_URL: url },
  });
  if (r.status !== 0) throw new Error(r.stderr);
  return dir;
}

const trustCa = () => ({ TF_HTTP_CLIENT_CA_CERTIFICATE_PEM: pem['ca.pem'] });
const present = (name: string) => ({
  TF_HTTP_CLIENT_CERTIFICATE_PEM: pem[`${name}.pem`],
  TF_HTTP_CLIENT_PRIVATE_KEY_PEM: pem[`${name}.key`],
});

beforeAll(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-auth-tls-'));
  pem = makeTestCertificates(root);
  tf = new Terraform(root);
  t = await createTestDatabase('kl_auth_tls');
  const boot = bootstrapToken(t.url, 'root', ['admin', 'write:*']);
  expect(boot.code).toBe(0);
  admin = boot.secret;
  const cert = bootstrapToken(
    t.url,
    'ci-cert',
    ['write:tls/*'],
    ['--cert-subject', 'CN=ci-runner, O=acme'],
  );
  expect(cert.code).toBe(0);
  expect(cert.secret).toBe(''); // no secret for a certificate identity
  const server = {
    KL_DATABASE_URL: t.url,
    KL_AUTH: 'on',
    KL_TLS_CERT: path.join(root, 'server.pem'),
    KL_TLS_KEY: path.join(root, 'server.key'),
  };
  [tls, mtls] = await Promise.all([
    startKld(server, 90_000, { tls: { ca: pem['ca.pem'] } }),
    startKld({ ...server, KL_TLS_CLIENT_CA: path.join(root, 'ca.pem') }, 90_000, {
      tls: { ca: pem['ca.pem'], cert: pem['client.pem'], key: pem['client.key'] },
    }),
  ]);
});

afterAll(async () => {
  tf?.killAll();
  await Promise.all([tls?.stop(), mtls?.stop()]);
  await t?.drop();
  if (root) fs.rmSync(root, { recursive: true, force: true });
});

it('serves HTTPS only, and says so in its log', async () => {
  expect(tls.url).toMatch(/^https:/);
  await expect(fetch(tls.url.replace('https:', 'http:') + '/healthz')).rejects.toThrow();
  expect(tls.output()).toContain(`"url":"${tls.url}"`);
});

it('terraform applies over HTTPS trusting our CA, with the token as its password', async () => {
  const dir = module(tls.url, `tls/${randomUUID().slice(0, 8)}`);
  const env = { ...trustCa(), TF_HTTP_USERNAME: 'alice', TF_HTTP_PASSWORD: admin };
  await tf.ok(dir, ['init', '-no-color'], env);
  const r = await tf.ok(dir, ['apply', '-auto-approve', '-no-color'], env);
  expect(r.out).toContain('Apply complete! Resources: 1 added');
  // Without the CA, terraform refuses the certificate.
  const untrusted = await tf.run(module(tls.url, 'tls/other'), ['init', '-no-color'], {
    TF_HTTP_PASSWORD: admin,
  });
  expect(untrusted.code).toBe(1);
  expect(untrusted.out).toMatch(/certificate signed by unknown authority/);
});

it('with client certificates required, the certificate is the identity', async () => {
  const state = `tls/${randomUUID().slice(0, 8)}`;
  const dir = module(mtls.url, state);
  const env = { ...trustCa(), ...present('client'), TF_HTTP_USERNAME: 'alice' };
  await tf.ok(dir, ['init', '-no-color'], env);
  const r = await tf.ok(dir, ['apply', '-auto-approve', '-no-color'], env);
  expect(r.out).toContain('Apply complete! Resources: 1 added');
  const history = await httpsStatus(`${mtls.url}/v1/api/states/${state}/history`, {
    ca: pem['ca.pem'],
    cert: pem['client.pem'],
    key: pem['client.key'],
  });
  expect(history).toBe(200);
  const events = spawnSync(process.execPath, [KL, 'history', state, '--format', 'json'], {
    encoding: 'utf8',
    env: {
      ...process.env,
      KL_SERVER_URL: tls.url,
      KL_TOKEN: admin,
      NODE_EXTRA_CA_CERTS: path.join(root, 'ca.pem'),
    },
  });
  expect(events.status).toBe(0);
  expect(JSON.parse(events.stdout).map((v: { actor: string }) => v.actor)).toEqual([
    'ci-cert (alice)',
  ]);
});

it('refuses no certificate, another CA, and a subject with no identity', async () => {
  const dir = module(mtls.url, `tls/${randomUUID().slice(0, 8)}`);
  const none = await tf.run(dir, ['init', '-no-color'], {
    ...trustCa(),
    TF_HTTP_USERNAME: 'alice',
    TF_HTTP_PASSWORD: admin,
  });
  expect(none.code).toBe(1);
  expect(none.out).toMatch(/certificate required|bad certificate|handshake/i);
  const rogue = await tf.run(dir, ['init', '-no-color'], { ...trustCa(), ...present('rogue') });
  expect(rogue.code).toBe(1);
  expect(rogue.out).toMatch(/unknown ca|bad certificate|certificate required|handshake/i);
  const stranger = await tf.run(dir, ['init', '-no-color'], {
    ...trustCa(),
    ...present('stranger'),
  });
  expect(stranger.code).toBe(1);
  expect(stranger.out).toContain('HTTP remote state endpoint requires auth');
  // A certificate identity has its scopes: ci-cert may not touch other states.
  const outside = await tf.run(module(mtls.url, 'team-b/x'), ['init', '-no-color'], {
    ...trustCa(),
    ...present('client'),
  });
  expect(outside.code).toBe(1);
  expect(outside.out).toContain('HTTP remote state endpoint invalid auth');
});

it('kl presents a client certificate (--client-cert/--client-key or KL_CLIENT_CERT/KL_CLIENT_KEY)', async () => {
  const state = `tls/${randomUUID().slice(0, 8)}`;
  const dir = module(mtls.url, state);
  const env = { ...trustCa(), ...present('client'), TF_HTTP_USERNAME: 'alice' };
  await tf.ok(dir, ['init', '-no-color'], env);
  await tf.ok(dir, ['apply', '-auto-approve', '-no-color'], env);
  const file = (name: string) => path.join(root, name);
  const kl = (args: string[], extra: Record<string, string> = {}) =>
    spawnSync(process.execPath, [KL, ...args], {
      encoding: 'utf8',
      env: {
        ...process.env,
        KL_TOKEN: '',
        KL_SERVER_URL: mtls.url,
        NODE_EXTRA_CA_CERTS: file('ca.pem'),
        ...extra,
      },
    });

  // From the environment: the certificate is the identity (ci-cert).
  const viaEnv = kl(['history', state, '--format', 'json'], {
    KL_CLIENT_CERT: file('client.pem'),
    KL_CLIENT_KEY: file('client.key'),
  });
  expect(viaEnv.stderr).toBe('');
  expect(viaEnv.status).toBe(0);
  expect(JSON.parse(viaEnv.stdout).map((v: { actor: string }) => v.actor)).toEqual([
    'ci-cert (alice)',
  ]);
  // From flags, and the identity's scopes still apply.
  const viaFlags = kl([
    '--client-cert',
    file('client.pem'),
    '--client-key',
    file('client.key'),
    'history',
    'team-b/x',
  ]);
  expect(viaFlags.status).not.toBe(0);
  expect(viaFlags.stderr).toMatch(/^kl: .*(scope|not allowed|forbidden|permission)/i);

  // Without one, the handshake fails: one line, non-zero.
  const none = kl(['history', state]);
  expect(none.status).not.toBe(0);
  expect(none.stderr).toMatch(/^kl: cannot reach kld at https:\/\/127\.0\.0\.1:\d+ \(.+\)/);
  expect(none.stderr.trim().split('\n')).toHaveLength(1);

  // Mistakes in the files are named before any connection.
  const cases: [Record<string, string>, RegExp][] = [
    [{ KL_CLIENT_CERT: file('client.pem') }, /needs both --client-cert .* and --client-key/],
    [
      { KL_CLIENT_CERT: file('client.pem'), KL_CLIENT_KEY: file('rogue.key') },
      /rogue\.key is not the private key of the certificate in .*client\.pem/,
    ],
    [
      { KL_CLIENT_CERT: file('missing.pem'), KL_CLIENT_KEY: file('client.key') },
      /cannot read the client certificate .*missing\.pem \(ENOENT\)/,
    ],
    [
      { KL_CLIENT_CERT: file('client.key'), KL_CLIENT_KEY: file('client.key') },
      /client\.key is not a PEM certificate/,
    ],
  ];
  for (const [extra, message] of cases) {
    const r = kl(['history', state], extra);
    expect(r.status).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(new RegExp(`^kl: [^\\n]*${message.source}[^\\n]*\\n$`));
  }
});
