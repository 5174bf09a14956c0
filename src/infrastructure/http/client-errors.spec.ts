import * as http from 'node:http';
import * as net from 'node:net';
import type { AddressInfo } from 'node:net';
import { answerClientErrors } from './client-errors';

/** A server whose route reads the whole body and answers 200; requests time out after 300 ms. */
async function serve() {
  const server = http.createServer(
    { requestTimeout: 300, headersTimeout: 300, connectionsCheckingInterval: 50 },
    (req, res) => {
      req.resume();
      req.on('end', () => res.end('{}'));
    },
  );
  answerClientErrors(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as AddressInfo).port };
}

/** What the server answers to `bytes` sent as they are (and nothing more). */
function raw(port: number, bytes: string): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(bytes));
    let text = '';
    socket.on('data', (c: Buffer) => (text += c.toString()));
    socket.on('error', reject);
    socket.on('close', () => {
      const [head, ...rest] = text.split('\r\n\r\n');
      try {
        resolve({ status: Number(head.split(' ')[1]), body: JSON.parse(rest.join('\r\n\r\n')) });
      } catch {
        reject(new Error(`not a JSON answer: ${text}`));
      }
    });
  });
}

describe('answerClientErrors', () => {
  it('answers a body that does not arrive in time with a JSON 408, not as malformed', async () => {
    const { server, port } = await serve();
    try {
      const r = await raw(
        port,
        'POST /x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n{',
      );
      expect(r).toEqual({
        status: 408,
        body: {
          error: {
            code: 'REQUEST.INVALID',
            message: 'the request did not arrive in time: send it whole, without pauses',
          },
        },
      });
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });

  it('answers an Expect it cannot meet with a JSON 417', async () => {
    const { server, port } = await serve();
    try {
      const r = await raw(
        port,
        'POST /x HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 200-ok\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}',
      );
      expect(r).toEqual({
        status: 417,
        body: {
          error: {
            code: 'REQUEST.INVALID',
            message: 'Expect: 200-ok cannot be met: only Expect: 100-continue is',
          },
        },
      });
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});
