import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
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
