import { configuration, loggerFor, withDatabase } from './setup';

/** `kld migrate`: the pending migrations applied (an embedded PostgreSQL started for it). */
export async function migrateDatabase(configFile: string | undefined): Promise<void> {
  const config = configuration(configFile);
  await withDatabase(config, loggerFor(config), async () => undefined);
}
