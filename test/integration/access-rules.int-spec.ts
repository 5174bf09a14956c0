import { PATH_METADATA } from '@nestjs/common/constants';
import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { KilolockModule } from '../../src/app/kilolock.module';
import { loadConfig } from '../../src/infrastructure/config/config';
import { ACCESS_RULE } from '../../src/infrastructure/http/access';
import { Notifier } from '../../src/infrastructure/postgres/notifier';
import { createTestDatabase, quietLogger, TestDatabase } from '../support/test-database';

/** Every route kld serves declares who may use it; none is left open by omission. */

let t: TestDatabase;
let app: NestExpressApplication;
let notifier: Notifier;

beforeAll(async () => {
  t = await createTestDatabase('kl_access_rules');
  notifier = new Notifier(t.url);
  app = await NestFactory.create<NestExpressApplication>(
    KilolockModule.forRuntime({
      config: loadConfig({ KL_DATABASE_URL: t.url, KL_GRPC_LISTEN: 'off' }),
      logger: quietLogger,
      db: t.db,
      notifier,
    }),
    { logger: false, bodyParser: false },
  );
  await app.init();
});

afterAll(async () => {
  await app?.close();
  await notifier?.close();
  await t?.drop();
});

it('every controller method with a route has an @Access rule (or its class has one)', () => {
  const discovery = app.get(DiscoveryService);
  const scanner = new MetadataScanner();
  const routes: string[] = [];
  const missing: string[] = [];
  for (const wrapper of discovery.getControllers()) {
    const type = wrapper.metatype as (new (...args: never[]) => object) | null;
    if (!type) continue;
    for (const method of scanner.getAllMethodNames(type.prototype)) {
      const handler = (type.prototype as Record<string, unknown>)[method] as object;
      if (Reflect.getMetadata(PATH_METADATA, handler) === undefined) continue;
      routes.push(`${type.name}.${method}`);
      if (
        Reflect.getMetadata(ACCESS_RULE, handler) === undefined &&
        Reflect.getMetadata(ACCESS_RULE, type) === undefined
      ) {
        missing.push(`${type.name}.${method}`);
      }
    }
  }
  expect(routes.length).toBeGreaterThan(30);
  expect(missing).toEqual([]);
});
