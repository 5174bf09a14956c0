import { ProviderError } from './provider-error';

/** The go-plugin handshake line a plugin prints on stdout once it is serving. */
export interface Handshake {
  coreProtocol: number;
  appProtocol: number;
  network: 'unix' | 'tcp';
  address: string;
  protocol: 'grpc';
  /** The plugin's self-signed server certificate (PEM), or null when it serves plaintext. */
  serverCertPem: string | null;
}

export function parseHandshakeLine(line: string): Handshake {
  const parts = line.trim().split('|');
  const bad = (why: string): never => {
    throw new ProviderError(
      'PROVIDER.START_FAILED',
      `bad plugin handshake (${why}): ${line.slice(0, 200)}`,
    );
  };
  if (parts.length < 5) bad('expected core|app|network|address|protocol[|cert]');
  const [core, app, network, address, protocol, cert = ''] = parts;
  if (core !== '1') bad(`core protocol ${core} is not 1`);
  if (!/^\d+$/.test(app)) bad(`app protocol ${app} is not a number`);
  if (network !== 'unix' && network !== 'tcp') bad(`network ${network}`);
  if (address === '') bad('empty address');
  if (protocol !== 'grpc') bad(`protocol ${protocol} (only grpc is supported)`);
  return {
    coreProtocol: 1,
    appProtocol: Number(app),
    network: network as 'unix' | 'tcp',
    address,
    protocol: 'grpc',
    serverCertPem: cert === '' ? null : derBase64ToPem(cert),
  };
}

/** go-plugin writes the DER certificate in base64 without padding. */
function derBase64ToPem(raw: string): string {
  if (!/^[A-Za-z0-9+/]+=*$/.test(raw)) {
    throw new ProviderError('PROVIDER.START_FAILED', 'plugin handshake certificate is not base64');
  }
  const padded = raw.replace(/=+$/, '') + '='.repeat((4 - (raw.replace(/=+$/, '').length % 4)) % 4);
  const lines = padded.match(/.{1,64}/g) ?? [];
  return `-----BEGIN CERTIFICATE-----\n${lines.join('\n')}\n-----END CERTIFICATE-----\n`;
}
