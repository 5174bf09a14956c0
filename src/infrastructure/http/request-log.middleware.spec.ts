import express from 'express';
import { request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../logging/logger';
import { requestLog } from './request-log.middleware';

interface Line {
  fields: { requestId: string; method: string; path: string; status: number; ms: number };
  msg: string;
}

describe('requestLog', () => {
  let server: Server;
  let port: number;
  const lines: Line[] = [];
  let answerLate: () => void = () => undefined;

  beforeAll(async () => {
    const logger = {
      info: (fields: Line['fields'], msg: string) => lines.push({ fields, msg }),
    } as unknown as Logger;
    const app = express();
    app.use(requestLog(logger));
    app.get('/ok', (_req, res) => void res.status(201).send('done'));
    // Answers only when the test says so: after its client has gone.
    app.get('/slow', (_req, res) => {
      answerLate = () => void res.status(200).send('too late');
    });
    server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  const until = async (n: number) => {
    for (let i = 0; i < 100 && lines.length < n; i++) await new Promise((r) => setTimeout(r, 10));
  };

  it('logs one line for an answered request, with its id, status and time', async () => {
    lines.length = 0;
    const res = await fetch(`http://127.0.0.1:${port}/ok?x=1`, {
      headers: { 'X-Request-Id': 'req-1' },
    });
    expect(await res.text()).toBe('done');
    await until(1);
    await new Promise((r) => setTimeout(r, 50));
    expect(lines).toHaveLength(1);
    expect(lines[0].msg).toBe('request');
    expect(lines[0].fields).toMatchObject({
      requestId: 'req-1',
      method: 'GET',
      path: '/ok?x=1',
      status: 201,
    });
    expect(lines[0].fields.ms).toBeGreaterThanOrEqual(0);
  });

  it('logs one "request aborted" line for a request its client gave up on, and no other when it is answered later', async () => {
    lines.length = 0;
    await new Promise<void>((resolve) => {
      const req = httpRequest({ host: '127.0.0.1', port, path: '/slow' });
      req.on('error', () => resolve());
      req.end();
      setTimeout(() => {
        req.destroy();
        resolve();
      }, 100);
    });
    await until(1);
    answerLate();
    await new Promise((r) => setTimeout(r, 50));
    expect(lines.map((l) => [l.msg, l.fields.path])).toEqual([['request aborted', '/slow']]);
  });
});
