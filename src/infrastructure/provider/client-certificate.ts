import { webcrypto } from 'node:crypto';
import type * as X509 from '@peculiar/x509';

export interface ClientCertificate {
  certPem: string;
  keyPem: string;
}

let cached: Promise<ClientCertificate> | null = null;

/**
 * The client half of go-plugin's AutoMTLS: a throwaway self-signed ECDSA
 * certificate that the plugin accepts as its only client CA. Its EKU must
 * allow clientAuth, or Go refuses the TLS handshake. One per Node process.
 */
export function clientCertificate(): Promise<ClientCertificate> {
  cached ??= generate().catch((e: unknown) => {
    cached = null;
    throw e;
  });
  return cached;
}

type CreateParams = Parameters<typeof X509.X509CertificateGenerator.createSelfSigned>;

async function generate(): Promise<ClientCertificate> {
  // Loaded here, when a plugin is launched: @peculiar/x509 and its ASN.1
  // modules (~200 files) cost ~70 ms of CPU, which `kl refresh --help`, a
  // refresh that fails before launching anything, and kld need not pay.
  await import('reflect-metadata');
  const x509 = await import('@peculiar/x509');
  const crypto = webcrypto as unknown as NonNullable<CreateParams[1]>;
  const algorithm = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };
  const keys = await webcrypto.subtle.generateKey(algorithm, true, ['sign', 'verify']);
  const serial = Buffer.from(webcrypto.getRandomValues(new Uint8Array(16)));
  serial[0] &= 0x7f; // Go rejects negative serial numbers
  const now = Date.now();
  const cert = await x509.X509CertificateGenerator.createSelfSigned(
    {
      serialNumber: serial.toString('hex'),
      name: 'CN=localhost, O=Kilolock',
      notBefore: new Date(now - 30_000),
      notAfter: new Date(now + 24 * 3600_000),
      keys: keys as unknown as CreateParams[0]['keys'],
      signingAlgorithm: algorithm,
      extensions: [
        new x509.BasicConstraintsExtension(true, undefined, true),
        new x509.KeyUsagesExtension(
          x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyCertSign,
          true,
        ),
        new x509.ExtendedKeyUsageExtension([
          x509.ExtendedKeyUsage.clientAuth,
          x509.ExtendedKeyUsage.serverAuth,
        ]),
        new x509.SubjectAlternativeNameExtension([{ type: 'dns', value: 'localhost' }]),
      ],
    },
    crypto,
  );
  const pkcs8 = await webcrypto.subtle.exportKey('pkcs8', keys.privateKey);
  const keyPem = x509.PemConverter.encode(pkcs8, 'PRIVATE KEY');
  return { certPem: cert.toString('pem'), keyPem };
}
