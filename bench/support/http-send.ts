import * as http from 'node:http';

/** One HTTP request on a kept-alive agent: its status, its body as text, its round trip. */
export function send(
  agent: http.Agent,
  method: string,
  url: string,
  body?: Buffer,
): Promise<{ status: number; body: string; ms: number }> {
  return new Promise((resolve, reject) => {
    const startedAt = performance.now();
    const headers: Record<string, string | number> = body
      ? { 'content-type': 'application/json', 'content-length': body.length }
      : {};
    const req = http.request(url, { method, agent, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          body: Buffer.concat(chunks).toString('utf8'),
          ms: performance.now() - startedAt,
        }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}
