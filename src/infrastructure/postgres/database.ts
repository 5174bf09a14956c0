import { Pool, PoolClient, PoolConfig, QueryResult, QueryResultRow, types } from 'pg';
import { parseJsonExact } from '../../domain/terraform/lossless-json';
import { connectionOptions } from './connection-options';
import { survivingConnectionLoss } from './pool-errors';
import { prepared } from './prepared-statement';
import type { StoppableSessions } from './stoppable-sessions';
import type { ReadModelGuard } from './unlogged-read-models';

/** DI token of the process's Database (the owner's pool). */
export const DATABASE = Symbol('Database');

export type Queryable = Pick<PoolClient, 'query'>;

const JSONB = 3802;

/**
 * How long an idle connection stays open. node-postgres closes them after
 * 10 s, so the push an operator or a pipeline sends a little later paid a
 * new backend for each connection its commit uses (PostgreSQL's start of a
 * session and its catalog caches, SCRAM on both sides, the read-model
 * guard's check) on the path it waits for; their next command mostly comes
 * within minutes. The pools' sizes still bound how many there are.
 */
export const IDLE_CONNECTION_MS = 5 * 60_000;

/**
 * jsonb numerics are exact, and node-pg's JSON.parse would round those a
 * double cannot hold; parsed exactly they come back marked, as a document
 * parsed losslessly holds them (see lossless-json). json columns are left
 * to JSON.parse: we write them with JSON.stringify, so their big numbers are
 * already marked strings, and event data is too large to scan twice.
 */
export const exactJsonbTypes = {
  getTypeParser(oid: number, format: 'text' | 'binary' = 'text'): (text: string) => unknown {
    if (oid === JSONB && format === 'text') return parseJsonExact;
    return (types.getTypeParser as (oid: number, format: string) => (text: string) => unknown)(
      oid,
      format,
    );
  },
};

/**
 * The one way we talk to PostgreSQL: a pool, plain queries, and transactions
 * that always end (commit on success, rollback on any throw).
 */
export class Database {
  readonly pool: Pool;

  constructor(
    /** The connection string: secret, never for logs or errors. */
    readonly url: string,
    options: Partial<PoolConfig> = {},
    /** Refuses reads of read models a crash has emptied (unlogged-read-models.ts). */
    readonly guard: ReadModelGuard | null = null,
  ) {
    this.pool = survivingConnectionLoss(
      new Pool({
        ...connectionOptions(url),
        max: 20,
        idleTimeoutMillis: IDLE_CONNECTION_MS,
        types: exactJsonbTypes,
        ...(guard ? { verify: guard.verify } : {}),
        ...options,
      }),
    );
    guard?.guardPool(this.pool);
  }

  async query<R extends QueryResultRow = QueryResultRow>(
    sql: string,
    params: unknown[] = [],
  ): Promise<R[]> {
    const result = await this.pool.query<R>(sql, params);
    return result.rows;
  }

  /**
   * `query` as a named statement (prepared-statement.ts: parsed and planned
   * once per connection): for the few statements a request runs every time,
   * a GET's version check and a token's lookup, where parsing and planning
   * are most of PostgreSQL's work.
   */
  async prepared<R extends QueryResultRow = QueryResultRow>(
    sql: string,
    params: unknown[],
  ): Promise<R[]> {
    const result = await this.pool.query<R>(prepared(sql, params));
    return result.rows;
  }

  /**
   * Runs `fn` in a transaction. `opening`: statements without parameters
   * (literals escaped by the caller) sent together with the BEGIN, one round
   * trip instead of two; each still runs with its own snapshot. `fn` gets
   * their results (the BEGIN's left out), in order. With `sessions`, a stop
   * of theirs cuts `fn`'s statements short and the transaction rolls back.
   */
  async transaction<T>(
    fn: (client: PoolClient, opened: QueryResult[]) => Promise<T>,
    opening?: string,
    sessions?: StoppableSessions,
  ): Promise<T> {
    const client = await this.pool.connect();
    // A connection whose ROLLBACK failed may still be in the transaction: not for the next caller.
    let broken = false;
    try {
      const session = sessions ? sessions.enter(client) : client;
      try {
        const begun = (await session.query(
          opening === undefined ? 'BEGIN' : `BEGIN; ${opening}`,
        )) as QueryResult | QueryResult[];
        // Several statements answer with one result each.
        const result = await fn(session, Array.isArray(begun) ? begun.slice(1) : []);
        await client.query('COMMIT');
        return result;
      } finally {
        await sessions?.leave(client);
      }
    } catch (err) {
      await client.query('ROLLBACK').catch(() => (broken = true));
      throw err;
    } finally {
      client.release(broken);
    }
  }

  /** A statement of this pool is running, or waiting for a connection. */
  busy(): boolean {
    return this.pool.totalCount > this.pool.idleCount || this.pool.waitingCount > 0;
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}
