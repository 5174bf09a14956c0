import { createPrivateKey, X509Certificate } from 'node:crypto';
import * as fs from 'node:fs';
import { DomainError } from '../../domain/shared/domain-error';
import { useClientCertificate } from './kld-http-client';

export interface ClientCertificateFiles {
  cert?: string;
  key?: string;
}

/**
 * Makes every https request of this process present a client certificate,
 * for a kld that requires one (`KL_TLS_CLIENT_CA`). kl loads this module (and
 * node:crypto) only when a certificate is given. The files are checked first,
 * so a wrong path or a key that does not belong to the certificate is one
 * clear line, not a failed handshake.
 */
export function presentClientCertificate(files: ClientCertificateFiles): void {
  if (!files.cert && !files.key) return;
  if (!files.cert || !files.key) {
    throw new DomainError(
      'CONFIG.INVALID',
      'a client certificate needs both --client-cert (KL_CLIENT_CERT) and --client-key (KL_CLIENT_KEY)',
    );
  }
  const cert = readPem(files.cert, 'client certificate');
  const key = readPem(files.key, 'client key');
  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(cert);
  } catch {
    throw new DomainError('CONFIG.INVALID', `${files.cert} is not a PEM certificate`);
  }
  let privateKey: ReturnType<typeof createPrivateKey>;
  try {
    privateKey = createPrivateKey(key);
  } catch {
    throw new DomainError(
      'CONFIG.INVALID',
      `${files.key} is not an unencrypted PEM private key (kl cannot ask for a passphrase)`,
    );
  }
  if (!certificate.checkPrivateKey(privateKey)) {
    throw new DomainError(
      'CONFIG.INVALID',
      `${files.key} is not the private key of the certificate in ${files.cert}`,
    );
  }
  useClientCertificate({ cert, key });
}

function readPem(file: string, what: string): Buffer {
  try {
    return fs.readFileSync(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'unreadable';
    throw new DomainError('CONFIG.INVALID', `cannot read the ${what} ${file} (${code})`);
  }
}
