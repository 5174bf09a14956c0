import * as net from 'node:net';
import { freePort } from '../../src/infrastructure/postgres/embedded-postgres';

/**
 * A port for a server a test must name in advance (the container's
 * healthcheck reads KL_LISTEN, so it cannot be 0). Picked below Linux's
 * ephemeral range (32768 and up): every outgoing connection of every worker
 * takes a local port from that range, and one took a port picked there in
 * the seconds before kld bound it (EADDRINUSE in a CI run). Checked free by
 * binding it; a few tries, then the kernel's choice.
 */
export async function listenPort(): Promise<number> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if (await bindable(port)) return port;
  }
  return freePort();
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}
