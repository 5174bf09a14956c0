import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import request from 'supertest';
import { KilolockModule, SLICES } from '../../src/app/kilolock.module';
import { openMaintenance } from '../../src/app/maintenance.module';
import { loadConfig } from '../../src/infrastructure/config/config';
import { PostgresEventStore } from '../../src/infrastructure/event-store/postgres-event-store';
import { Notifier } from '../../src/infrastructure/postgres/notifier';
import { ErrorFilter } from '../../src/infrastructure/http/error.filter';
import { ProjectionRunner } from '../../src/projections/projection-runner';
import { allProjectors } from '../support/all-projectors';
import { createTestDatabase, quietLogger, TestDatabase } from '../support/test-database';

const DOCUMENT = JSON.stringify({
  version: 4,
  terraform_version: '1.11.4',
  serial: 1,
  lineage: 'modules',
  outputs: {},
  resources: [],
  check_results: null,
});

/** kld's Nest modules: composed in any order, they answer the same. */
describe('kld modules', () => {
  let t: TestDatabase;
  let notifier: Notifier;
  const runtime = () => ({
    config: loadConfig({ KL_DATABASE_URL: t.url, KL_LISTEN: '127.0.0.1:0', KL_GRPC_LISTEN: 'off' }),
    logger: quietLogger,
    db: t.db,
    notifier,
  });

  beforeAll(async () => {
    t = await createTestDatabase();
    notifier = new Notifier(t.url);
  });
  afterAll(async () => {
    await notifier.close();
    await t.drop();
  });

  async function app(slices: readonly (typeof SLICES)[number][]): Promise<NestExpressApplication> {
    const nest = await NestFactory.create<NestExpressApplication>(
      KilolockModule.forRuntime(runtime(), slices),
      { logger: false, bodyParser: false, abortOnError: false },
    );
    nest.useGlobalFilters(new ErrorFilter(quietLogger));
    return nest.init();
  }

  describe.each([
    ['as kld lists them', SLICES],
    ['in reverse', [...SLICES].reverse()],
  ])('with the slices %s', (_order, slices) => {
    let nest: NestExpressApplication;
    beforeAll(async () => (nest = await app(slices)));
    afterAll(() => nest.close());

    it('routes POST <name>/refresh to the refresh slice and POST <name> to the backend', async () => {
      const http = nest.getHttpServer();
      const name = `order-${slices[0].name}`;
      // The refresh slice's own answer for a state with nothing to refresh.
      for (const action of ['refresh', 'Refresh']) {
        const r = await request(http)
          .post(`/v1/states/team/${name}/${action}`)
          .set('Content-Type', 'application/json')
          .send('{}')
          .expect(404);
        expect(r.body.error).toEqual({
          code: 'STATE.NOT_FOUND',
          message: `state team/${name} does not exist or has nothing committed to refresh`,
        });
      }
      await request(http)
        .post(`/v1/states/team/${name}`)
        .set('Content-Type', 'application/json')
        .send(DOCUMENT)
        .expect(200);
      const got = await request(http).get(`/v1/states/team/${name}`).expect(200);
      expect(JSON.parse(got.text)).toMatchObject({ serial: 1, lineage: 'modules' });
      // A name that is only the action word is the backend's to refuse.
      const reserved = await request(http)
        .post('/v1/states/refresh')
        .set('Content-Type', 'application/json')
        .send(DOCUMENT)
        .expect(400);
      expect(reserved.body.error.code).toBe('REQUEST.INVALID');
      expect(reserved.body.error.message).toMatch(/reserved/);
    });

    it('routes <name>/reservations and apply runs to the apply slice, <name>/history to the API', async () => {
      const http = nest.getHttpServer();
      const name = `team/routes-${slices[0].name}`;
      await request(http)
        .post(`/v1/states/${name}`)
        .set('Content-Type', 'application/json')
        .send(DOCUMENT)
        .expect(200);
      const held = await request(http).get(`/v1/api/states/${name}/reservations`).expect(200);
      expect(held.body).toEqual({ state: name, reservations: [], runs: [] });
      const history = await request(http).get(`/v1/api/states/${name}/history`).expect(200);
      expect(history.body).toMatchObject({ state: name });
      const runs = await request(http).get(`/v1/api/apply-runs?state=${name}`).expect(200);
      expect(runs.body).toEqual({ runs: [] });
      const started = await request(http)
        .post(`/v1/api/states/${name}/apply-runs`)
        .set('Content-Type', 'application/json')
        .send('{"base_version": 1, "write": ["*"]}')
        .expect(201);
      expect(started.body).toMatchObject({
        state: name,
        reservations: [{ glob: '*', mode: 'write' }],
      });
    });
  });

  it('registers every projector with kld and with the maintenance commands', async () => {
    const nest = await app(SLICES);
    const maintenance = await openMaintenance(runtime());
    try {
      const expected = allProjectors(new PostgresEventStore(t.db, notifier))
        .map((p) => p.name)
        .sort();
      expect(expected.length).toBeGreaterThanOrEqual(5);
      expect(nest.get(ProjectionRunner).names().sort()).toEqual(expected);
      expect(maintenance.runner.names().sort()).toEqual(expected);
    } finally {
      await maintenance.close();
      await nest.close();
    }
  });
});
