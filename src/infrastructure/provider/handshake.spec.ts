import { X509Certificate } from 'node:crypto';
import { clientCertificate } from './client-certificate';
import { parseHandshakeLine } from './handshake';
import { ProviderError } from './provider-error';

describe('go-plugin handshake line', () => {
  it('parses a unix-socket line with an unpadded base64 DER certificate', async () => {
    const { certPem } = await clientCertificate();
    const der = new X509Certificate(certPem).raw;
    const unpadded = der.toString('base64').replace(/=+$/, '');
    const hs = parseHandshakeLine(`1|5|unix|/tmp/kl-plugin-x/plugin123|grpc|${unpadded}\n`);
    expect(hs).toMatchObject({
      coreProtocol: 1,
      appProtocol: 5,
      network: 'unix',
      address: '/tmp/kl-plugin-x/plugin123',
      protocol: 'grpc',
    });
    expect(new X509Certificate(hs.serverCertPem!).raw.equals(der)).toBe(true);
  });

  it('parses a tcp line, protocol 6, without a certificate (plaintext)', () => {
    expect(parseHandshakeLine('1|6|tcp|127.0.0.1:10001|grpc|')).toEqual({
      coreProtocol: 1,
      appProtocol: 6,
      network: 'tcp',
      address: '127.0.0.1:10001',
      protocol: 'grpc',
      serverCertPem: null,
    });
    expect(parseHandshakeLine('1|6|tcp|127.0.0.1:10001|grpc').serverCertPem).toBeNull();
  });

  it.each([
    ['This binary is a plugin. These are not meant to be executed directly.'],
    ['2|5|unix|/tmp/s|grpc|'],
    ['1|5|unix|/tmp/s|netrpc|'],
    ['1|5|pipe|/tmp/s|grpc|'],
    ['1|x|unix|/tmp/s|grpc|'],
    ['1|5|unix||grpc|'],
    ['1|5|unix|/tmp/s|grpc|not*base64'],
  ])('refuses %j as PROVIDER.START_FAILED', (line) => {
    expect(() => parseHandshakeLine(line)).toThrow(ProviderError);
    try {
      parseHandshakeLine(line);
    } catch (e) {
      expect((e as ProviderError).code).toBe('PROVIDER.START_FAILED');
    }
  });

  it('generates a client certificate Go accepts: positive serial, clientAuth EKU', async () => {
    const cert = new X509Certificate((await clientCertificate()).certPem);
    expect(cert.subject).toContain('CN=localhost');
    expect(parseInt(cert.serialNumber.slice(0, 2), 16) & 0x80).toBe(0);
    expect(cert.keyUsage).toContain('1.3.6.1.5.5.7.3.2');
    expect(new Date(cert.validTo).getTime()).toBeGreaterThan(Date.now());
  });
});
