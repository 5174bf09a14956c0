import { Config, loadConfig } from '../../infrastructure/config/config';
import { effectiveEnvironment } from '../../infrastructure/config/config-file';
import { createLogger, Logger } from '../../infrastructure/logging/logger';
import { Database } from '../../infrastructure/postgres/database';
import { migrate } from '../../infrastructure/postgres/migrator';
import { openDatabase } from '../../infrastructure/postgres/open-database';

/** The configuration: defaults < config file (`--config`) < environment < flags. */
export function configuration(
  configFile: string | undefined,
  flags: { listen?: string } = {},
): Config {
  return loadConfig(effectiveEnvironment(process.env, configFile).env, flags);
}

/** The server logs to stdout; the other commands to stderr, their stdout being their answer. */
export function loggerFor(config: Config, to: 'stdout' | 'stderr' = 'stderr'): Logger {
  return createLogger(config.logLevel, config.logFormat, to);
}

/** For one-shot commands: the database (embedded or not), migrated, then released. */
export async function withDatabase<T>(
  config: Config,
  logger: Logger,
  fn: (db: Database, url: string) => Promise<T>,
): Promise<T> {
  const { url, embedded } = await openDatabase(config, logger);
  try {
    await migrate(url, logger);
    const db = new Database(url);
    try {
      return await fn(db, url);
    } finally {
      await db.close();
    }
  } finally {
    await embedded?.stop();
  }
}
