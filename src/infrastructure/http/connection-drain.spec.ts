import * as http from 'node:http';
import * as net from 'node:net';
import { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import { DEFAULT_IDLE_MS, drainableConnections, idleBoundOf } from './connection-drain';

/** A server whose one route answers after `slowMs`; closing reports how long it took. */
async function serve(slowMs: number, keepAliveMs = 65_000) {
  const server = http.createServer((_req, res) => {
    const answer = setTimeout(() => res.end('done'), slowMs);
    res.once('close', () => clearTimeout(answer));
  });
  const connections = drainableConnections(server, keepAliveMs);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  const close = async (graceMs: number) => {
    const started = Date.now();
    connections.drain(graceMs);
    await new Promise<void>((r) => server.close(() => r()));
    connections.stop();
    return Date.now() - started;
  };
  return { server, port, close };
}

const connect = (port: number) =>
  new Promise<net.Socket>((resolve) => {
    const s = net.connect(port, '127.0.0.1', () => resolve(s));
  });

describe('drainableConnections', () => {
  it('keeps idle connections longer than a load balancer does', async () => {
    const { server, close } = await serve(0);
    expect(server.keepAliveTimeout).toBe(65_000);
    expect(server.headersTimeout).toBeGreaterThan(server.keepAliveTimeout);
    await close(1_000);
  });

  it('keeps them as long as the bound asks, past the time a whole request may take', async () => {
    const { server, close } = await serve(0, 4_100_000);
    expect(server.keepAliveTimeout).toBe(4_100_000);
    // Node's rule: the headers within the request's time, which a long idle bound leaves as it is.
    expect(server.requestTimeout).toBe(300_000);
    expect(server.headersTimeout).toBe(300_000);
    await close(1_000);
  });

  it('closes a kept-alive connection idle for the bound, and names the bound to its answers', async () => {
    const bounds: number[] = [];
    const server = http.createServer((_req, res) => {
      bounds.push(idleBoundOf(res));
      res.end('done');
    });
    const connections = drainableConnections(server, 1_000);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as AddressInfo).port;
    const socket = await connect(port);
    const closed = new Promise<void>((r) => socket.once('close', () => r()));
    socket.on('data', () => undefined);
    socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    await closed;
    expect(bounds).toEqual([1_000]);
    expect(idleBoundOf(new PassThrough())).toBe(DEFAULT_IDLE_MS);
    connections.drain(1_000);
    await new Promise<void>((r) => server.close(() => r()));
    connections.stop();
  });

  it('closes at once although a connection was opened and never used', async () => {
    const { port, close } = await serve(0);
    const idle = await connect(port);
    const ended = new Promise((r) => idle.once('close', r));
    expect(await close(30_000)).toBeLessThan(5_000);
    await ended;
  });

  it('closes at once although a kept-alive connection sits idle after a request', async () => {
    const { port, close } = await serve(0);
    const agent = new http.Agent({ keepAlive: true });
    const body = await new Promise<string>((resolve) =>
      http.get({ port, host: '127.0.0.1', agent }, (res) => {
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve(text));
      }),
    );
    expect(body).toBe('done');
    expect(await close(30_000)).toBeLessThan(5_000);
    agent.destroy();
  });

  it('closes a connection that sends no request, and only that one', async () => {
    const { port, close } = await serve(1_500, 200);
    const silent = await connect(port);
    const closedByServer = new Promise<boolean>((r) => silent.once('end', () => r(true)));
    // Its answer takes longer than a silent connection may stay: once asked, it is not cut.
    const answer = new Promise<string>((resolve, reject) =>
      http
        .get({ port, host: '127.0.0.1' }, (res) => {
          let text = '';
          res.on('data', (c) => (text += c));
          res.on('end', () => resolve(text));
        })
        .on('error', reject),
    );
    expect(await closedByServer).toBe(true);
    expect(await answer).toBe('done');
    silent.destroy();
    await close(1_000);
  });

  it('lets a request in flight finish, then closes its connection', async () => {
    const { server, port, close } = await serve(300);
    // In flight once the server has it: a connection with no request yet is closed at once.
    const arrived = new Promise((r) => server.once('request', r));
    const answer = new Promise<{ status: number; body: string }>((resolve, reject) =>
      http
        .get({ port, host: '127.0.0.1', agent: new http.Agent({ keepAlive: true }) }, (res) => {
          let text = '';
          res.on('data', (c) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
        })
        .on('error', reject),
    );
    await arrived;
    await close(30_000);
    expect(await answer).toEqual({ status: 200, body: 'done' });
  });

  it('ends a request still running when the grace period is over', async () => {
    const { server, port, close } = await serve(60_000);
    const arrived = new Promise((r) => server.once('request', r));
    const failed = new Promise<string>((resolve) =>
      http.get({ port, host: '127.0.0.1' }).on('error', (err) => resolve(err.message)),
    );
    await arrived;
    const took = await close(200);
    expect(took).toBeLessThan(5_000);
    expect(await failed).toMatch(/socket hang up|ECONNRESET/);
  });
});
