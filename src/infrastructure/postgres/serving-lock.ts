import { Client } from 'pg';
import { connectionOptions } from './connection-options';
import type { Logger } from '../logging/logger';
import { DomainError } from '../../domain/shared/domain-error';

// Session advisory lock (namespace, key). Every serving kld holds it shared;
// an offline tool that must not run under a live server takes it exclusively.
// Session-scoped, so a killed server's connection drops and frees it.
const LOCK_NAMESPACE = 7_300_424;
const LOCK_KEY = 1;
const RECONNECT_MS = 2_000;

export class ServerRunningError extends DomainError {
  constructor(message: string) {
    super('SERVER.RUNNING', message);
    this.name = 'ServerRunningError';
  }
}

/**
 * What a serving kld holds while it runs, on a connection of its own: a
 * shared advisory lock that says "a server uses this database". If the
 * connection drops (database restart), it reconnects and takes it again.
 */
export class ServingLock {
  private client: Client | null = null;
  private released = false;
  private retry: NodeJS.Timeout | null = null;

  private constructor(
    private readonly url: string,
    private readonly logger: Logger,
  ) {}

  static async hold(url: string, logger: Logger): Promise<ServingLock> {
    const lock = new ServingLock(url, logger);
    await lock.take();
    return lock;
  }

  private async take(): Promise<void> {
    const client = new Client(connectionOptions(this.url));
    client.on('error', () => this.lost(client));
    client.on('end', () => this.lost(client));
    await client.connect();
    try {
      const { rows } = await client.query<{ ok: boolean }>(
        'SELECT pg_try_advisory_lock_shared($1, $2) AS ok',
        [LOCK_NAMESPACE, LOCK_KEY],
      );
      if (!rows[0].ok) {
        this.logger.info('an offline `kld projections rebuild` is running; waiting for it to end');
        await client.query('SELECT pg_advisory_lock_shared($1, $2)', [LOCK_NAMESPACE, LOCK_KEY]);
      }
    } catch (err) {
      await client.end().catch(() => undefined);
      throw err;
    }
    if (this.released) await client.end().catch(() => undefined);
    else this.client = client;
  }

  private lost(client: Client): void {
    if (this.client !== client || this.released) return;
    this.client = null;
    client.end().catch(() => undefined);
    this.logger.warn(
      'lost the database connection that marks this server as running; reconnecting',
    );
    this.scheduleRetake();
  }

  private scheduleRetake(): void {
    this.retry = setTimeout(() => {
      this.retry = null;
      if (this.released) return;
      this.take().catch(() => this.scheduleRetake());
    }, RECONNECT_MS);
    this.retry.unref();
  }

  async release(): Promise<void> {
    this.released = true;
    if (this.retry) clearTimeout(this.retry);
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => undefined);
  }
}

/**
 * Runs `fn` only while no kld serves this database, and keeps any from
 * starting meanwhile (a starting server waits for the lock).
 */
export async function withoutServer<T>(
  url: string,
  what: string,
  fn: () => Promise<T>,
): Promise<T> {
  const client = new Client(connectionOptions(url));
  client.on('error', () => undefined);
  await client.connect();
  try {
    const { rows } = await client.query<{ ok: boolean }>(
      'SELECT pg_try_advisory_lock($1, $2) AS ok',
      [LOCK_NAMESPACE, LOCK_KEY],
    );
    if (!rows[0].ok) {
      throw new ServerRunningError(`a kld server is running on this database; ${what}`);
    }
    return await fn();
  } finally {
    await client.end().catch(() => undefined);
  }
}
