import { DynamicModule, Module, Provider } from '@nestjs/common';
import { CqrsModule } from '@nestjs/cqrs';
import { randomUUID } from 'node:crypto';
import { CLOCK, IDS } from '../application/ports/clock.port';
import { EVENT_STORE } from '../application/ports/event-store.port';
import { SNAPSHOT_STORE } from '../application/ports/snapshot-store.port';
import type { Config } from '../infrastructure/config/config';
import { Notifier } from '../infrastructure/event-store/notifier';
import { PostgresEventStore } from '../infrastructure/event-store/postgres-event-store';
import { PostgresSnapshotStore } from '../infrastructure/event-store/postgres-snapshot-store';
import { AdminController } from '../infrastructure/http/admin.controller';
import { HealthController } from '../infrastructure/http/health.controller';
import type { Logger } from '../infrastructure/logging/logger';
import { Database } from '../infrastructure/postgres/database';
import { ProjectionRunner } from '../projections/projection-runner';
import { Projector, PROJECTORS } from '../projections/projector';
import { CONFIG, DATABASE, LOGGER, NOTIFIER } from './tokens';
import { FEATURES } from './features';

/** What the process owns before Nest starts: config, logger, database, wake-ups. */
export interface Runtime {
  config: Config;
  logger: Logger;
  db: Database;
  notifier: Notifier;
}

@Module({})
export class KilolockModule {
  static forRuntime(runtime: Runtime): DynamicModule {
    const features = FEATURES;
    const base: Provider[] = [
      { provide: CONFIG, useValue: runtime.config },
      { provide: LOGGER, useValue: runtime.logger },
      { provide: DATABASE, useValue: runtime.db },
      { provide: NOTIFIER, useValue: runtime.notifier },
      { provide: CLOCK, useValue: { now: () => new Date() } },
      { provide: IDS, useValue: { uuid: () => randomUUID() } },
      {
        provide: EVENT_STORE,
        useFactory: (db: Database, n: Notifier) => new PostgresEventStore(db, n),
        inject: [DATABASE, NOTIFIER],
      },
      {
        provide: SNAPSHOT_STORE,
        useFactory: (db: Database) => new PostgresSnapshotStore(db),
        inject: [DATABASE],
      },
      {
        provide: PROJECTORS,
        useFactory: (db: Database): Projector[] => features.flatMap((f) => f.projectors(db)),
        inject: [DATABASE],
      },
      {
        provide: ProjectionRunner,
        useFactory: (db: Database, n: Notifier, projectors: Projector[], logger: Logger) =>
          new ProjectionRunner(db, n, projectors, logger),
        inject: [DATABASE, NOTIFIER, PROJECTORS, LOGGER],
      },
    ];
    return {
      module: KilolockModule,
      imports: [CqrsModule.forRoot()],
      controllers: [HealthController, AdminController, ...features.flatMap((f) => f.controllers)],
      providers: [...base, ...features.flatMap((f) => f.providers)],
    };
  }
}
