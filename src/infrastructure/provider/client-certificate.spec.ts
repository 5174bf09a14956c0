import { createPrivateKey, X509Certificate } from 'node:crypto';
import * as tls from 'node:tls';
import { clientCertificate, positiveSerial } from './client-certificate';

describe('plugin client certificate', () => {
  it('is a self-signed CA for localhost, for TLS clients and servers, valid now', async () => {
    const { certPem, keyPem } = await clientCertificate();
    const cert = new X509Certificate(certPem);
    expect(cert.subject.split('\n')).toEqual(['CN=localhost', 'O=Kilolock']);
    expect(cert.issuer).toBe(cert.subject);
    expect(cert.verify(cert.publicKey)).toBe(true);
    expect(cert.checkPrivateKey(createPrivateKey(keyPem))).toBe(true);
    expect(cert.ca).toBe(true);
    expect(cert.subjectAltName).toBe('DNS:localhost');
    expect(cert.keyUsage).toEqual(['1.3.6.1.5.5.7.3.2', '1.3.6.1.5.5.7.3.1']);
    expect(cert.publicKey.asymmetricKeyDetails?.namedCurve).toBe('prime256v1');
    const now = Date.now();
    expect(new Date(cert.validFrom).getTime()).toBeLessThanOrEqual(now);
    expect(new Date(cert.validTo).getTime()).toBeGreaterThan(now + 3600_000);
  });

  it('is generated once per process', async () => {
    expect(await clientCertificate()).toBe(await clientCertificate());
  });

  it('completes a mutual TLS handshake with a server that trusts only it', async () => {
    // As go-plugin's AutoMTLS does: the client's certificate is the server's only client CA.
    const { certPem, keyPem } = await clientCertificate();
    const server = tls.createServer({
      cert: certPem,
      key: keyPem,
      ca: certPem,
      requestCert: true,
      rejectUnauthorized: true,
    });
    // A refused client certificate ends the handshake on the server's side only (TLS 1.3).
    const authorized = new Promise<boolean>((resolve) => {
      server.once('secureConnection', (socket) => {
        resolve(socket.authorized);
        socket.end();
      });
      server.once('tlsClientError', () => resolve(false));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    try {
      const client = tls.connect({
        host: '127.0.0.1',
        port,
        servername: 'localhost',
        cert: certPem,
        key: keyPem,
        ca: certPem,
      });
      await new Promise<void>((resolve, reject) => {
        client.once('secureConnect', resolve);
        client.once('error', reject);
      });
      client.on('error', () => undefined);
      const accepted = await authorized;
      client.destroy();
      expect(client.authorized).toBe(true);
      expect(accepted).toBe(true);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  describe('serial number', () => {
    it('reads as positive', () => {
      expect([...positiveSerial(Buffer.from([0xff, 0x01]))]).toEqual([0x7f, 0x01]);
    });

    it('drops leading zero bytes DER does not allow', () => {
      expect([...positiveSerial(Buffer.from([0x80, 0x00, 0x12]))]).toEqual([0x12]);
    });

    it('keeps the zero byte before a byte with its high bit set', () => {
      expect([...positiveSerial(Buffer.from([0x00, 0x80, 0x12]))]).toEqual([0x00, 0x80, 0x12]);
    });
  });
});
