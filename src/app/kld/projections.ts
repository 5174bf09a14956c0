import 'reflect-metadata';
import type { Config } from '../../infrastructure/config/config';
import type { Logger } from '../../infrastructure/logging/logger';
import type { Database } from '../../infrastructure/postgres/database';
import { EmbeddedPostgresInUseError } from '../../infrastructure/postgres/embedded-postgres';
import { Notifier } from '../../infrastructure/postgres/notifier';
import { ServerRunningError, withoutServer } from '../../infrastructure/postgres/serving-lock';
import {
  ownConnection,
  rebuildWitnessed,
} from '../../infrastructure/postgres/unlogged-read-models';
import type { ProjectionRunner } from '../../projections/projection-runner';
import { openMaintenance } from '../maintenance.module';
import { configuration, loggerFor, withDatabase } from './setup';

/** The projection runner of every read model, not started (nothing is served). */
async function withRunner<T>(
  config: Config,
  logger: Logger,
  db: Database,
  url: string,
  fn: (runner: ProjectionRunner) => Promise<T>,
): Promise<T> {
  const notifier = new Notifier(url);
  try {
    const maintenance = await openMaintenance({ config, logger, db, notifier });
    try {
      return await fn(maintenance.runner);
    } finally {
      await maintenance.close();
    }
  } finally {
    await notifier.close();
  }
}

const REBUILD_ON_SERVER =
  'rebuild through it instead: kl projections rebuild (POST /v1/admin/projections/rebuild)';

/** `kld projections rebuild`: offline; a running server (embedded or on KL_DATABASE_URL) must do it itself. */
export async function rebuildProjections(configFile: string | undefined): Promise<void> {
  const config = configuration(configFile);
  const logger = loggerFor(config);
  try {
    await withDatabase(config, logger, (db, url) =>
      withoutServer(url, REBUILD_ON_SERVER, () =>
        withRunner(config, logger, db, url, async (runner) => {
          // Also after a crash emptied the UNLOGGED read models: the marker
          // written, the next `serve` finds them whole and does not rebuild again.
          const witness = await ownConnection(url);
          try {
            for (const r of await rebuildWitnessed(witness, () => runner.rebuild())) {
              process.stdout.write(`${r.projector}: ${r.events} events replayed\n`);
            }
          } finally {
            await witness.end().catch(() => undefined);
          }
        }),
      ),
    );
  } catch (err) {
    if (err instanceof EmbeddedPostgresInUseError) {
      throw new ServerRunningError(`${err.message}; ${REBUILD_ON_SERVER}`);
    }
    throw err;
  }
}

const SKIP_ON_SERVER =
  'skip through it instead: POST /v1/admin/projections/skip (docs/operations.md)';

/** `kld projections skip`: records a skip; next to a running server too (it wakes that server's halted projectors). */
export async function skipEvent(
  configFile: string | undefined,
  projector: string,
  position: bigint,
  reason: string,
): Promise<void> {
  const config = configuration(configFile);
  const logger = loggerFor(config);
  try {
    await withDatabase(config, logger, (db, url) =>
      withRunner(config, logger, db, url, async (runner) => {
        const skipped = await runner.skip(projector, position, reason);
        process.stdout.write(
          `${skipped.projector} will skip event ${skipped.position} ` +
            `(${skipped.type} on stream ${skipped.stream})\n`,
        );
      }),
    );
  } catch (err) {
    if (err instanceof EmbeddedPostgresInUseError) {
      throw new ServerRunningError(`${err.message}; ${SKIP_ON_SERVER}`);
    }
    throw err;
  }
}
