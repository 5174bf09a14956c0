import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { KldHttpClient } from '../rest/kld-http-client';
import { RestRefreshServer } from './rest-refresh-server';

describe('RestRefreshServer against a kld that asks it to come back (429)', () => {
  it('sends a batch of results again after the wait: kld records a batch sent twice once', async () => {
    const bodies: string[] = [];
    const server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        bodies.push(body);
        if (bodies.length === 1) {
          res.writeHead(429, { 'retry-after': '0' }).end('{"error":{"message":"busy"}}');
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"recorded":1}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const written = jest.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      await new RestRefreshServer(new KldHttpClient(url)).recordResults('r1', [
        {
          address: 'aws_instance.a',
          provider: 'registry.terraform.io/hashicorp/aws',
          outcome: 'unchanged',
          beforeHash: 'h',
          afterHash: 'h',
          changedPaths: [],
        },
      ]);
      expect(bodies).toHaveLength(2);
      expect(bodies[1]).toBe(bodies[0]);
      expect(written).toHaveBeenCalledTimes(1);
    } finally {
      written.mockRestore();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
