import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A kld stand-in on 127.0.0.1 that answers its first request `429` with
 * `Retry-After: 0` and every later one with `answer(body)`. `use` gets its
 * URL and the request bodies received so far; kl's one waiting line on
 * stderr is caught and counted in `waits`.
 */
export async function withBusyFirstServer(
  answer: (body: string, res: http.ServerResponse) => void,
  use: (url: string, bodies: string[], waits: () => number) => Promise<void>,
): Promise<void> {
  const bodies: string[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      bodies.push(body);
      if (bodies.length === 1) {
        res.writeHead(429, { 'retry-after': '0' }).end('{"error":{"message":"busy"}}');
        return;
      }
      answer(body, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const written = jest.spyOn(process.stderr, 'write').mockImplementation(() => true);
  try {
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    await use(url, bodies, () => written.mock.calls.length);
  } finally {
    written.mockRestore();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}
