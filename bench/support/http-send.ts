import * as http from 'node:http';
import { SyntheticState } from './state-generator';

/** One HTTP request on a kept-alive agent: its status, its body's bytes, its round trip. */
export function sendBytes(
  agent: http.Agent,
  method: string,
  url: string,
  body?: Buffer,
  headers: http.OutgoingHttpHeaders = body
    ? { 'content-type': 'application/json', 'content-length': body.length }
    : {},
): Promise<{ status: number; body: Buffer; ms: number }> {
  return new Promise((resolve, reject) => {
    const startedAt = performance.now();
    const req = http.request(url, { method, agent, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          body: Buffer.concat(chunks),
          ms: performance.now() - startedAt,
        }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** One HTTP request on a kept-alive agent: its status, its body as text, its round trip. */
export async function send(
  agent: http.Agent,
  method: string,
  url: string,
  body?: Buffer,
): Promise<{ status: number; body: string; ms: number }> {
  const r = await sendBytes(agent, method, url, body);
  return { ...r, body: r.body.toString('utf8') };
}

/** POST of a synthetic state of `instances` (SyntheticState, `seed`) as `name`: its answer; throws unless 200. */
export async function postSyntheticState(
  agent: http.Agent,
  baseUrl: string,
  name: string,
  instances: number,
  seed: number,
): Promise<{ status: number; body: string; ms: number }> {
  const text = Buffer.from(new SyntheticState({ instances, seed }).text());
  const posted = await send(agent, 'POST', `${baseUrl}/v1/states/${name}`, text);
  if (posted.status !== 200) throw new Error(`POST ${name}: ${posted.status} ${posted.body}`);
  return posted;
}
