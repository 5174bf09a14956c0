import { Client } from 'pg';
import type { Config } from '../config/config';
import type { Logger } from '../logging/logger';
import { connectionOptions } from './connection-options';
import { defaultDataDir, EmbeddedPostgres } from './embedded-postgres';

/**
 * kld's database: KL_DATABASE_URL's, or its own on an embedded PostgreSQL
 * started here (the caller stops it). Not migrated yet.
 */
export async function openDatabase(
  config: Config,
  logger: Logger,
): Promise<{ url: string; embedded: EmbeddedPostgres | null }> {
  if (config.databaseUrl) return { url: config.databaseUrl, embedded: null };
  const dataDir = config.dataDirExplicit ? config.dataDir : defaultDataDir(config.dataDir, logger);
  const embedded = await EmbeddedPostgres.start(dataDir, logger);
  try {
    return { url: await ensureDatabase(embedded.url, 'kilolock'), embedded };
  } catch (err) {
    await embedded.stop();
    throw err;
  }
}

async function ensureDatabase(serverUrl: string, name: string): Promise<string> {
  const client = new Client(connectionOptions(serverUrl));
  client.on('error', () => undefined); // a lost connection fails the next statement instead
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (!rowCount) await client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`);
  } finally {
    await client.end();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}
