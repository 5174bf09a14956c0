import { withBusyFirstServer } from '../../../test/support/busy-first-server';
import { KldHttpClient } from '../rest/kld-http-client';
import { RestRefreshServer } from './rest-refresh-server';

describe('RestRefreshServer against a kld that asks it to come back (429)', () => {
  it('sends a batch of results again after the wait: kld records a batch sent twice once', async () => {
    await withBusyFirstServer(
      (_, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"recorded":1}'),
      async (url, bodies, waits) => {
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
        expect(waits()).toBe(1);
      },
    );
  });
});
