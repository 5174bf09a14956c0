import { generateKeyPair, KeyObject, randomBytes, sign } from 'node:crypto';
import { promisify } from 'node:util';

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

const generateEcKeyPair = promisify(generateKeyPair);

/** How long the certificate is valid around now: a refresh outlives neither bound. */
const BACKDATE_MS = 30_000;
const LIFETIME_MS = 24 * 3600_000;

/**
 * The certificate is one fixed X.509 v3 layout, so it is written here as DER
 * (RFC 5280) and signed with node:crypto: an X.509 library cost kl 0.15-0.2 s
 * of CPU to load on every refresh (docs/performance-history.md,
 * "Refresh: the plugin client certificate (wave 25)"), ahead of the first spawn.
 */
async function generate(): Promise<ClientCertificate> {
  const { publicKey, privateKey } = await generateEcKeyPair('ec', { namedCurve: 'P-256' });
  const now = Date.now();
  const certDer = selfSigned({
    serial: positiveSerial(randomBytes(16)),
    name: [
      [OID.commonName, 'localhost'],
      [OID.organization, 'Kilolock'],
    ],
    notBefore: new Date(now - BACKDATE_MS),
    notAfter: new Date(now + LIFETIME_MS),
    publicKey,
    privateKey,
  });
  return {
    certPem: pem('CERTIFICATE', certDer),
    keyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  };
}

interface CertificateFields {
  serial: Buffer;
  name: [oid: string, value: string][];
  notBefore: Date;
  notAfter: Date;
  publicKey: KeyObject;
  privateKey: KeyObject;
}

const OID = {
  commonName: '2.5.4.3',
  organization: '2.5.4.10',
  ecdsaWithSha256: '1.2.840.10045.4.3.2',
  basicConstraints: '2.5.29.19',
  keyUsage: '2.5.29.15',
  extKeyUsage: '2.5.29.37',
  subjectAltName: '2.5.29.17',
  clientAuth: '1.3.6.1.5.5.7.3.2',
  serverAuth: '1.3.6.1.5.5.7.3.1',
} as const;

/** keyUsage digitalSignature (bit 0) and keyCertSign (bit 5): 2 unused bits, then 1000 0100. */
const KEY_USAGE_BITS = Buffer.from([0x02, 0x84]);

/**
 * A CA (critical basic constraints), usable for signatures and certificate
 * signing (critical key usage), for TLS clients and servers, named
 * "localhost", signed by its own key with ECDSA over SHA-256.
 */
function selfSigned(f: CertificateFields): Buffer {
  const algorithm = sequence(oid(OID.ecdsaWithSha256));
  const name = sequence(
    ...f.name.map(([type, value]) => set(sequence(oid(type), tlv(UTF8_STRING, value)))),
  );
  const extensions = sequence(
    extension(OID.basicConstraints, true, sequence(tlv(BOOLEAN, Buffer.from([0xff])))),
    extension(OID.keyUsage, true, tlv(BIT_STRING, KEY_USAGE_BITS)),
    extension(OID.extKeyUsage, false, sequence(oid(OID.clientAuth), oid(OID.serverAuth))),
    extension(OID.subjectAltName, false, sequence(tlv(DNS_NAME, 'localhost'))),
  );
  const tbs = sequence(
    tlv(0xa0, tlv(INTEGER, Buffer.from([2]))), // [0] version: v3
    tlv(INTEGER, f.serial),
    algorithm,
    name,
    sequence(time(f.notBefore), time(f.notAfter)),
    name,
    f.publicKey.export({ type: 'spki', format: 'der' }),
    tlv(0xa3, extensions), // [3] extensions
  );
  // An EC key signs in DER (r, s) by default, as X.509 wants.
  const signature = sign('sha256', tbs, f.privateKey);
  return sequence(tbs, algorithm, tlv(BIT_STRING, Buffer.concat([Buffer.from([0]), signature])));
}

const BOOLEAN = 0x01;
const INTEGER = 0x02;
const BIT_STRING = 0x03;
const OCTET_STRING = 0x04;
const OBJECT_IDENTIFIER = 0x06;
const UTF8_STRING = 0x0c;
const UTC_TIME = 0x17;
const GENERALIZED_TIME = 0x18;
const SEQUENCE = 0x30;
const SET = 0x31;
/** GeneralName dNSName: [2] IMPLICIT IA5String. */
const DNS_NAME = 0x82;

function tlv(tag: number, content: Buffer | string): Buffer {
  const body = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
  return Buffer.concat([Buffer.from([tag]), derLength(body.length), body]);
}

function derLength(length: number): Buffer {
  if (length < 0x80) return Buffer.from([length]);
  const bytes: number[] = [];
  for (let n = length; n > 0; n = Math.floor(n / 256)) bytes.unshift(n & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

function sequence(...items: Buffer[]): Buffer {
  return tlv(SEQUENCE, Buffer.concat(items));
}

function set(...items: Buffer[]): Buffer {
  return tlv(SET, Buffer.concat(items));
}

function oid(dotted: string): Buffer {
  const [first, second, ...rest] = dotted.split('.').map(Number);
  const bytes = [first * 40 + second];
  for (const arc of rest) {
    const base128 = [arc & 0x7f];
    for (let n = Math.floor(arc / 128); n > 0; n = Math.floor(n / 128)) {
      base128.unshift(0x80 | (n & 0x7f));
    }
    bytes.push(...base128);
  }
  return tlv(OBJECT_IDENTIFIER, Buffer.from(bytes));
}

function extension(id: string, critical: boolean, value: Buffer): Buffer {
  // DER leaves out a BOOLEAN equal to its DEFAULT (FALSE).
  const flag = critical ? [tlv(BOOLEAN, Buffer.from([0xff]))] : [];
  return sequence(oid(id), ...flag, tlv(OCTET_STRING, value));
}

/** UTCTime through 2049, GeneralizedTime from 2050 (RFC 5280, 4.1.2.5), to the second, in UTC. */
function time(at: Date): Buffer {
  const digits = at
    .toISOString()
    .replace(/\.\d+Z$/, 'Z')
    .replace(/[-:T]/g, '');
  return at.getUTCFullYear() < 2050
    ? tlv(UTC_TIME, digits.slice(2))
    : tlv(GENERALIZED_TIME, digits);
}

/**
 * A serial number as a minimal DER INTEGER that reads as positive: Go
 * rejects negative serial numbers and, like DER, integers with a redundant
 * leading zero byte.
 */
export function positiveSerial(random: Buffer): Buffer {
  const bytes = Buffer.from(random);
  bytes[0] &= 0x7f;
  let start = 0;
  while (start < bytes.length - 1 && bytes[start] === 0 && (bytes[start + 1] & 0x80) === 0) {
    start++;
  }
  return bytes.subarray(start);
}

function pem(label: string, der: Buffer): string {
  const lines = der.toString('base64').match(/.{1,64}/g) ?? [];
  return `-----BEGIN ${label}-----\n${lines.join('\n')}\n-----END ${label}-----\n`;
}
