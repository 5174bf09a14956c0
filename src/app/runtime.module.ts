import { DynamicModule, Global, Module } from '@nestjs/common';
import { RandomUuids } from '../infrastructure/ids/random-uuids';
import { CLOCK, EVENT_IDS, IDS } from '../application/ports/clock.port';
import { CONFIG, type Config } from '../infrastructure/config/config';
import { NOTIFIER, Notifier } from '../infrastructure/postgres/notifier';
import { COMMAND_METRICS } from '../application/ports/metrics.port';
import { LOGGER, type Logger } from '../infrastructure/logging/logger';
import { METRICS, PrometheusMetrics } from '../infrastructure/metrics/prometheus-metrics';
import { DATABASE, Database } from '../infrastructure/postgres/database';

/** What the process owns before Nest starts: config, logger, database, wake-ups. */
export interface Runtime {
  config: Config;
  logger: Logger;
  db: Database;
  notifier: Notifier;
  /** What `/metrics` exports; one is made when none is given. */
  metrics?: PrometheusMetrics;
}

/**
 * The process's own resources, its metrics, and the clock and ids every command takes.
 * Global, like a config module: every module uses them and none may bring
 * its own; everything else a module uses it imports by name.
 */
@Global()
@Module({})
export class RuntimeModule {
  static forRoot(runtime: Runtime): DynamicModule {
    const metrics = runtime.metrics ?? new PrometheusMetrics();
    metrics.watchPool('commands', runtime.db.pool);
    const providers = [
      { provide: METRICS, useValue: metrics },
      { provide: COMMAND_METRICS, useValue: metrics },
      { provide: CONFIG, useValue: runtime.config },
      { provide: LOGGER, useValue: runtime.logger },
      { provide: DATABASE, useValue: runtime.db },
      { provide: NOTIFIER, useValue: runtime.notifier },
      { provide: CLOCK, useValue: { now: () => new Date() } },
      { provide: IDS, useValue: new RandomUuids() },
      { provide: EVENT_IDS, useValue: new RandomUuids({ timeOrdered: true }) },
    ];
    return {
      module: RuntimeModule,
      providers,
      exports: providers.map((p) => p.provide),
    };
  }
}
