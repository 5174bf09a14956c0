import { setImmediate as nextTurn } from 'node:timers/promises';
import type { PoolClient } from 'pg';
import request from 'supertest';
import { startServer, KldServer } from '../../src/app/server';
import { loadConfig } from '../../src/infrastructure/config/config';
import type { Database } from '../../src/infrastructure/postgres/database';
import { StateEngineReadModel } from '../../src/infrastructure/read-models/state-engine-read-model';
import { selectorCandidate } from '../../src/domain/state-engine/scope';
import { testDocument } from '../support/state-harness';
import { createTestDatabase, quietLogger, TestDatabase } from '../support/test-database';

/** kld has one thread: a big slice must not hold it while its document is written. */
describe('a state-engine slice of 20,000 instances', () => {
  let t: TestDatabase;
  let server: KldServer;
  const http = () => server.app.getHttpServer();
  const STATE = 'team/big';
  const INSTANCES = 20_000;

  beforeAll(async () => {
    t = await createTestDatabase();
    server = await startServer(
      loadConfig({ KL_DATABASE_URL: t.url, KL_LISTEN: '127.0.0.1:0', KL_GRPC_LISTEN: 'off' }),
      quietLogger,
    );
    const doc = testDocument(
      1,
      Array.from({ length: INSTANCES }, (_, i) => ({ name: 'x', key: i, input: `v${i}` })),
    );
    await request(http())
      .post(`/v1/states/${STATE}`)
      .set('Content-Type', 'application/json')
      .send(JSON.stringify(doc))
      .expect(200);
  }, 120_000);
  afterAll(async () => {
    await server.close();
    await t.drop();
  });

  it('lets other work run while its document is written, and is the same document', async () => {
    // Through HTTP first: the read models have caught up, and this is the document served.
    const served = await request(http())
      .post(`/v1/engine/states/${STATE}/slice`)
      .set('Content-Type', 'application/json')
      .send(JSON.stringify({ selectors: [{ type: 'terraform_data' }] }))
      .expect(200);
    expect(served.headers['x-kilolock-slice-instances']).toBe(String(INSTANCES));

    // The same read, with a count of the turns of the event loop that other
    // work got from the moment its last read of PostgreSQL answered.
    let turns = 0;
    let turnsAtLastRead = -1;
    let turnsWhileWritten = -1;
    let building = true;
    const ticker = (async () => {
      while (building) {
        await nextTurn();
        turns += 1;
      }
    })();
    const watched = {
      transaction: <T>(fn: (client: PoolClient) => Promise<T>) =>
        t.db.transaction(async (client) => {
          const query = client.query.bind(client) as (...args: unknown[]) => Promise<unknown>;
          const seen = new Proxy(client, {
            get: (target, key) =>
              key === 'query'
                ? (...args: unknown[]) =>
                    query(...args).then((result) => {
                      turnsAtLastRead = turns;
                      return result;
                    })
                : Reflect.get(target, key),
          });
          const built = await fn(seen);
          // Before the COMMIT's round trip, which lets other work run anyway.
          turnsWhileWritten = turns - turnsAtLastRead;
          building = false;
          return built;
        }),
    } as unknown as Database;
    const slice = await new StateEngineReadModel(watched).slice(STATE, [
      selectorCandidate({ type: 'terraform_data' }),
    ]);
    await ticker;
    expect(slice.document.join('')).toBe(served.text);
    expect(slice.instances).toHaveLength(INSTANCES);
    // Written in one go, the document left other work no turn at all.
    expect(turnsWhileWritten).toBeGreaterThanOrEqual(3);
  }, 120_000);
});
