import * as http from 'node:http';
import { AddressInfo } from 'node:net';
import { stringifyJson } from '../../domain/terraform/lossless-json';
import { KldHttpClient } from './kld-http-client';
import { RestApplyServer } from './rest-apply-server';

/** A kld stand-in on 127.0.0.1 answering every request with `answer`; request bodies are kept. */
async function withServer(
  answer: string,
  test: (server: RestApplyServer, bodies: unknown[]) => Promise<void>,
): Promise<void> {
  const bodies: unknown[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      bodies.push(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      res.writeHead(200, { 'content-type': 'application/json' }).end(answer);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    await test(new RestApplyServer(new KldHttpClient(url)), bodies);
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

const document =
  '{"version":4,"terraform_version":"1.11.4","serial":3,"lineage":"L","outputs":{},' +
  '"resources":[{"mode":"managed","type":"terraform_data","name":"a",' +
  '"provider":"provider[\\"terraform.io/builtin/terraform\\"]","instances":[' +
  '{"schema_version":0,"attributes":{"id":"a","input":12345678901234567890}}]}],' +
  '"check_results":null}';

const scope = {
  state: 'st',
  version: 5,
  serial: 3,
  lineage: 'L',
  instance_count: 20008,
  scope: [],
  closure: [],
  unresolved: [],
  reservations: { write: ['terraform_data.a'], read: [] },
  provably_safe: true,
  reasons: [],
};

describe('RestApplyServer: the scope with its slice', () => {
  it('asks for the slice only when told, and reads the slice in the answer with its numbers exact', async () => {
    const answer =
      JSON.stringify(scope).slice(0, -1) +
      `,"slice":{"version":5,"serial":3,"instances":1,"bytes":${Buffer.byteLength(document)},"document":${document}}}`;
    await withServer(answer, async (server, bodies) => {
      const candidates = { addresses: ['terraform_data.a'], modulePrefixes: [] };
      const both = await server.expandScope('st', candidates, { withSlice: true });
      expect(bodies[0]).toEqual({ addresses: ['terraform_data.a'], slice: true });
      expect(both).toMatchObject({ version: 5, provablySafe: true, instanceCount: 20008 });
      expect(both.slice?.version).toBe(5);
      expect(both.slice?.bytes).toBe(Buffer.byteLength(document));
      // The number terraform will read back is the one committed, not a double's.
      expect(stringifyJson(both.slice?.document)).toContain('"input":12345678901234567890');
      await server.expandScope('st', candidates);
      expect(bodies[1]).toEqual({ addresses: ['terraform_data.a'] });
    });
  });

  it('refuses a slice in the answer without its version', async () => {
    const answer = JSON.stringify({ ...scope, slice: { instances: 1, document: {} } });
    await withServer(answer, async (server) => {
      await expect(
        server.expandScope('st', { addresses: ['a.b'], modulePrefixes: [] }, { withSlice: true }),
      ).rejects.toThrow(/sent a scope's slice without its version/);
    });
  });
});
