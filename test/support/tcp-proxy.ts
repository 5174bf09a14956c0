import * as net from 'node:net';

/**
 * A TCP proxy on 127.0.0.1 in front of another local port, for tests that
 * take the database away from kld and give it back: `cut()` drops every
 * connection and refuses new ones, `stall()` drops every connection and
 * holds new ones open without ever answering (a server that hangs),
 * `restore()` forwards again on the same port.
 */
export class TcpProxy {
  private server: net.Server | null = null;
  private readonly sockets = new Set<net.Socket>();
  private stalled = false;
  port = 0;

  constructor(private readonly target: { host: string; port: number }) {}

  async start(): Promise<this> {
    await this.listen(0);
    return this;
  }

  /** `url` with its host and port replaced by the proxy's. */
  via(url: string): string {
    const u = new URL(url);
    u.hostname = '127.0.0.1';
    u.port = String(this.port);
    return u.toString();
  }

  async cut(): Promise<void> {
    const server = this.server;
    this.server = null;
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
    if (server) await new Promise((resolve) => server.close(resolve));
  }

  async stall(): Promise<void> {
    await this.cut();
    this.stalled = true;
    await this.listen(this.port);
  }

  async restore(): Promise<void> {
    this.stalled = false;
    if (!this.server) await this.listen(this.port);
  }

  private listen(port: number): Promise<void> {
    const server = net.createServer((client) => {
      if (this.stalled) {
        this.sockets.add(client);
        client.on('error', () => undefined);
        client.on('close', () => this.sockets.delete(client));
        client.resume(); // read and drop: the peer sees an open, silent server
        return;
      }
      const upstream = net.connect(this.target.port, this.target.host);
      for (const socket of [client, upstream]) {
        this.sockets.add(socket);
        socket.on('error', () => undefined);
        socket.on('close', () => {
          this.sockets.delete(socket);
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream).pipe(client);
    });
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        this.server = server;
        this.port = (server.address() as net.AddressInfo).port;
        resolve();
      });
    });
  }
}
