import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { withBusyFirstServer } from '../../test/support/busy-first-server';
import { KilolockClient } from './kilolock-client';

describe('KilolockClient.events against a stream that is not kld', () => {
  let server: http.Server;
  let url: string;
  let sent: string[];

  beforeAll(async () => {
    server = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (const part of sent) res.write(part);
      res.end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  async function read(maxEventChars: number): Promise<string[]> {
    const data: string[] = [];
    for await (const m of new KilolockClient(url).events({}, undefined, maxEventChars)) {
      data.push(m.data);
    }
    return data;
  }

  it('an event that runs past the bound without its end is one error, after the events before it', async () => {
    sent = ['data: {"position":"1"}\n\n', 'data: ', 'x'.repeat(600), 'x'.repeat(600)];
    const data: string[] = [];
    await expect(
      (async () => {
        for await (const m of new KilolockClient(url).events({}, undefined, 1000)) {
          data.push(m.data);
        }
      })(),
    ).rejects.toThrow(
      new RegExp(`^an event from kld at ${url} runs past 1000 characters without its end`),
    );
    expect(data).toEqual(['{"position":"1"}']);
  });

  it('many data lines of one event count together; events up to the bound pass', async () => {
    sent = [`data: ${'y'.repeat(400)}\n`.repeat(3)];
    await expect(read(1000)).rejects.toThrow(/runs past 1000 characters/);
    sent = [`data: ${'y'.repeat(400)}\n\n`.repeat(3)];
    expect(await read(1000)).toEqual(Array(3).fill('y'.repeat(400)));
  });
});

describe('KilolockClient against a kld that asks it to come back (429)', () => {
  it('a state-engine run start carries a run id of its own, so the retry answers the same run', async () => {
    await withBusyFirstServer(
      (body, res) => {
        const { run_id } = JSON.parse(body) as { run_id: string };
        res.writeHead(201, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ run_id, reservations: [] }));
      },
      async (url, bodies, waits) => {
        const run = await new KilolockClient(url).engineStartRun('a', {
          operation: 'rm',
          base_version: 1,
          write: ['x.y'],
        });
        const sent = bodies.map((b) => JSON.parse(b) as { run_id: string });
        expect(sent).toHaveLength(2);
        expect(sent[0].run_id).toMatch(/^[0-9a-f-]{36}$/);
        expect(sent[1]).toEqual(sent[0]);
        expect(run.run_id).toBe(sent[0].run_id);
        expect(waits()).toBe(1);
      },
    );
  });
});
