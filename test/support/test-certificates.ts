import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

/**
 * A test CA (`ca`), a server certificate for 127.0.0.1 (`server`), client
 * certificates `client` (CN=ci-runner, O=acme) and `stranger` of that CA,
 * and `rogue` (the same subject as `client`) of another CA, made with
 * openssl in `dir`, valid for two days. Answers every PEM by file name
 * (`ca.pem`, `client.key`, …).
 */
export function makeTestCertificates(dir: string): Record<string, string> {
  const openssl = (args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  const days = ['-days', '2'];
  const key = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  for (const ca of ['ca', 'rogue-ca']) {
    openssl([
      'req',
      '-x509',
      ...key,
      '-keyout',
      `${ca}.key`,
      '-out',
      `${ca}.pem`,
      '-subj',
      `/CN=${ca}`,
      ...days,
    ]);
  }
  const leaf = (name: string, subject: string, ca: string, ext: string) => {
    openssl(['req', ...key, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', subject]);
    fs.writeFileSync(path.join(dir, `${name}.ext`), ext);
    openssl([
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      `${ca}.pem`,
      '-CAkey',
      `${ca}.key`,
      '-CAcreateserial',
      '-out',
      `${name}.pem`,
      '-extfile',
      `${name}.ext`,
      ...days,
    ]);
  };
  leaf(
    'server',
    '/CN=127.0.0.1',
    'ca',
    'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n',
  );
  const client = 'extendedKeyUsage=clientAuth\n';
  leaf('client', '/CN=ci-runner/O=acme', 'ca', client);
  leaf('stranger', '/CN=stranger', 'ca', client);
  leaf('rogue', '/CN=ci-runner/O=acme', 'rogue-ca', client);
  return Object.fromEntries(
    fs
      .readdirSync(dir)
      .filter((f) => /\.(pem|key)$/.test(f))
      .map((f) => [f, fs.readFileSync(path.join(dir, f), 'utf8')]),
  );
}
