import { Pool, PoolClient, PoolConfig, QueryResultRow } from 'pg';

/** DI token of the process's Database (the owner's pool). */
export const DATABASE = Symbol('Database');

export type Queryable = Pick<PoolClient, 'query'>;

/**
 * The one way we talk to PostgreSQL: a pool, plain queries, and transactions
 * that always end (commit on success, rollback on any throw).
 */
export class Database {
  readonly pool: Pool;

  constructor(url: string, options: Partial<PoolConfig> = {}) {
    this.pool = new Pool({ connectionString: url, max: 20, ...options });
    // An idle client losing its connection must not crash the process.
    this.pool.on('error', () => undefined);
  }

  async query<R extends QueryResultRow = QueryResultRow>(
    sql: string,
    params: unknown[] = [],
  ): Promise<R[]> {
    const result = await this.pool.query<R>(sql, params);
    return result.rows;
  }

  async transaction<T>(fn: (client: PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      const result = await fn(client);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}
