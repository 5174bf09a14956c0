import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One exchange as the proxy saw it. */
export interface ProxiedExchange {
  method: string;
  path: string;
  status: number;
  /** Body bytes each way. */
  requestBytes: number;
  responseBytes: number;
  /** From the request's last byte forwarded to the answer's last byte received. */
  ms: number;
  /** The answer's X-Kilolock-Slice-Instances: it carried a slice (`/slice`, or a scope with it). */
  sliceInstances?: number;
}

export interface CountingProxy {
  /** Base URL clients use instead of the upstream's. */
  url: string;
  /** The exchanges since the last `take()`, and forgets them. */
  take(): ProxiedExchange[];
  close(): Promise<void>;
}

/**
 * A loopback HTTP proxy in front of kld that counts what each client moves
 * (body bytes both ways) and which routes it calls, so a bench can tell
 * which lane a client really used and what it cost on the wire, whatever
 * the client itself reports.
 */
export async function startCountingProxy(upstream: string): Promise<CountingProxy> {
  const target = new URL(upstream);
  let log: ProxiedExchange[] = [];
  const agent = new http.Agent({ keepAlive: true });
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const started = performance.now();
      const out = http.request(
        {
          hostname: target.hostname,
          port: target.port,
          path: req.url,
          method: req.method,
          headers: { ...req.headers, host: target.host },
          agent,
        },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          let bytes = 0;
          answer.on('data', (c: Buffer) => {
            bytes += c.length;
            res.write(c);
          });
          answer.on('end', () => {
            log.push({
              method: req.method ?? '?',
              path: (req.url ?? '').split('?')[0],
              status: answer.statusCode ?? 0,
              requestBytes: body.length,
              responseBytes: bytes,
              ms: performance.now() - started,
              ...(answer.headers['x-kilolock-slice-instances'] === undefined
                ? {}
                : { sliceInstances: Number(answer.headers['x-kilolock-slice-instances']) }),
            });
            res.end();
          });
        },
      );
      out.on('error', () => {
        res.writeHead(502).end();
      });
      out.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    take() {
      const taken = log;
      log = [];
      return taken;
    },
    close: () =>
      new Promise<void>((resolve) => {
        agent.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
