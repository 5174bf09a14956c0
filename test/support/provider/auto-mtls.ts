import 'reflect-metadata';
import { randomBytes, webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';

export interface ServerCertificate {
  certPem: string;
  keyPem: string;
  /** What go-plugin expects in the handshake line: unpadded base64 of the DER. */
  handshakeField: string;
}

const algorithm = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };

/** go-plugin's AutoMTLS: a fresh self-signed leaf that the host pins as its only CA. */
export async function createServerCertificate(): Promise<ServerCertificate> {
  const crypto = webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0];
  x509.cryptoProvider.set(crypto);
  const keys = (await webcrypto.subtle.generateKey(algorithm, true, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair;
  const now = Date.now();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    // A leading 01 keeps the serial positive; Go rejects negative serials.
    serialNumber: `01${randomBytes(15).toString('hex')}`,
    name: 'CN=localhost, O=Kilolock',
    notBefore: new Date(now - 30_000),
    notAfter: new Date(now + 24 * 3600_000),
    signingAlgorithm: algorithm,
    keys: keys as unknown as Parameters<
      typeof x509.X509CertificateGenerator.createSelfSigned
    >[0]['keys'],
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(
        x509.KeyUsageFlags.digitalSignature |
          x509.KeyUsageFlags.keyEncipherment |
          x509.KeyUsageFlags.keyCertSign,
        true,
      ),
      new x509.ExtendedKeyUsageExtension([
        x509.ExtendedKeyUsage.serverAuth,
        x509.ExtendedKeyUsage.clientAuth,
      ]),
      new x509.SubjectAlternativeNameExtension([{ type: 'dns', value: 'localhost' }]),
    ],
  });
  const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey));
  return {
    certPem: cert.toString('pem'),
    keyPem: pem('PRIVATE KEY', pkcs8),
    handshakeField: Buffer.from(cert.rawData).toString('base64').replace(/=+$/, ''),
  };
}

function pem(label: string, der: Buffer): string {
  const lines = der.toString('base64').match(/.{1,64}/g) ?? [];
  return `-----BEGIN ${label}-----\n${lines.join('\n')}\n-----END ${label}-----\n`;
}
