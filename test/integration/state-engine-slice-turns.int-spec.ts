import { setImmediate as nextTurn } from 'node:timers/promises';
import request from 'supertest';
import { startServer, KldServer } from '../../src/app/server';
import { loadConfig } from '../../src/infrastructure/config/config';
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
    // work got while its document was made and read.
    let turns = 0;
    let building = true;
    const ticker = (async () => {
      while (building) {
        await nextTurn();
        turns += 1;
      }
    })();
    const slice = await new StateEngineReadModel(t.db).slice(STATE, [
      selectorCandidate({ type: 'terraform_data' }),
    ]);
    const turnsBefore = turns;
    const pieces: string[] = [];
    for await (const piece of slice.text()) pieces.push(piece);
    building = false;
    await ticker;
    expect(pieces.join('')).toBe(served.text);
    expect(slice.instanceCount).toBe(INSTANCES);
    // Written in one go, the document left other work no turn at all.
    expect(turns - turnsBefore).toBeGreaterThanOrEqual(3);
  }, 120_000);
});
