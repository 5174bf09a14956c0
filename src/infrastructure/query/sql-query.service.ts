import { Client, Pool, PoolClient, QueryArrayConfig, QueryArrayResult, QueryConfig } from 'pg';
import { DomainError } from '../../domain/shared/domain-error';
import type { Logger } from '../logging/logger';
import type { Database } from '../postgres/database';
import { connectionOptions } from '../postgres/connection-options';
import { survivingConnectionLoss } from '../postgres/pool-errors';
import {
  isPgServerError,
  PgServerError,
  QUERY_FORBIDDEN,
  QUERY_INVALID,
  queryError,
} from './query-errors';
import { queryTypeParsers } from './query-values';
import { QUERY_LIMITS } from './query-limits';
import { replyBudget } from './reply-budget';
import { AdvisoryLockWatch, watchAdvisoryLocks } from './advisory-lock-watch';
import { ensureReaderPassword, READER_ROLE, readerUrl } from './reader-role';
import type { SqlQueryResult } from '../../domain/wire/query';

export interface SqlQuery {
  sql: string;
  params: unknown[];
  maxRows: number;
  timeoutMs: number;
}

/**
 * What a query may see: LIKE patterns of the readable state names, and
 * whether log streams of no state are shown (authentication off).
 */
export interface QueryScope {
  patterns: string[];
  allStreams: boolean;
}

export const EVERYTHING: QueryScope = { patterns: ['%'], allStreams: true };

const CURSOR_PREFIX = 'DECLARE kl_query NO SCROLL CURSOR FOR ';
/** PostgreSQL's FirstNormalObjectId: oids below it are the server's own (initdb's). */
const FIRST_NORMAL_OID = 16384;

/**
 * Runs user SQL as `kl_reader` on a pool of its own that logs in as that
 * role: what it may read is decided by PostgreSQL's grants, never by
 * inspecting the SQL. Each query runs in a read-only transaction with a
 * statement timeout and is fetched through a cursor, so a huge result costs
 * `maxRows + 1` rows of memory, not the whole result.
 */
export class SqlQueryService {
  private pool: Pool | null = null;
  private ready: Promise<void> | null = null;

  /** Reader connections' backend pids, which key their rows in kl_query_grants. */
  private readonly pids = new WeakMap<PoolClient, number>();
  /** format_type of the built-in types results had, by oid (columnTypes). */
  private readonly builtinTypes = new Map<number, string>();
  /** Backends running a caller's statement now: cancelled when kld stops. */
  private readonly running = new Set<number>();
  private stopping = false;

  constructor(
    private readonly owner: Database,
    private readonly logger: Logger,
  ) {}

  private get databaseUrl(): string {
    return this.owner.url;
  }

  /** Sets the reader's password; failures are logged and retried on the next query. */
  async start(): Promise<void> {
    await this.prepare().catch((err: unknown) =>
      this.logger.warn({ err }, `query role ${READER_ROLE} is not usable yet`),
    );
  }

  /**
   * As kld stops: a statement may run for minutes (`timeout_ms`), and the
   * reader pool's end waits for it, so shutdown would wait too. Each one is
   * cancelled and answered 503; the caller runs it again elsewhere or later.
   */
  async stopRunning(): Promise<void> {
    this.stopping = true;
    await Promise.all([...this.running].map((pid) => this.cancel(pid).catch(() => undefined)));
  }

  async close(): Promise<void> {
    await this.pool?.end();
    this.pool = null;
  }

  /**
   * Round trips are most of a small query's time (docs/performance-history.md,
   * "The seed queries' round trip (wave 25)"), so what does not depend on
   * another step goes together: the grant (on the owner's connection) with
   * the transaction's opening (on the reader's), and at the end the revoke
   * with the session's reset.
   */
  async run(query: SqlQuery, scope: QueryScope): Promise<SqlQueryResult> {
    if (this.stopping) throw stoppingError();
    const client = await this.connect();
    let reusable = true;
    let pid: number | null = null;
    let budget: ReturnType<typeof replyBudget> | null = null;
    let locks: AdvisoryLockWatch | null = null;
    try {
      pid = await this.backendPid(client);
      this.running.add(pid);
      // The grant must be written before the user's statement takes its
      // snapshot (the DECLARE, after both are done), not before BEGIN.
      await settled([
        this.grant(pid, scope),
        client.query(
          `BEGIN READ ONLY; SET LOCAL statement_timeout = ${Math.floor(query.timeoutMs)}; ` +
            'SAVEPOINT kl_query',
        ),
      ]);
      if (this.stopping) throw stoppingError();
      budget = replyBudget(client, QUERY_LIMITS.maxReplyBytes);
      locks = watchAdvisoryLocks(
        pid,
        (p) => this.holdsAdvisoryLock(p),
        (p) => this.cancel(p),
      );
      const result = await this.execute(client, query);
      budget.end();
      locks.stop();
      if (locks.caught) throw advisoryLockRefusal();
      // the reader's connection asked for the marker (verifyThrough) before it ran
      await this.owner.guard?.assertUntouched(client);
      // node-postgres takes COPY … TO STDOUT and drops the data it streams:
      // the answer would be an empty success.
      if (result.command === 'COPY') {
        throw new DomainError(
          QUERY_INVALID,
          'COPY is not supported: a query returns rows; use SELECT (kl query --format csv writes CSV)',
        );
      }
      const columns = await this.columnTypes(client, result);
      await client.query('ROLLBACK'); // nothing to keep; also ends a cursor left open
      const truncated = result.rows.length > query.maxRows;
      return {
        columns,
        rows: truncated ? result.rows.slice(0, query.maxRows) : result.rows,
        truncated,
      };
    } catch (err) {
      budget?.end();
      locks?.stop();
      if (locks?.caught) {
        await client.query('ROLLBACK').catch(() => (reusable = false));
        throw advisoryLockRefusal();
      }
      if (budget?.exceeded) {
        // Its connection is closed: what the statement failed with says nothing more.
        reusable = false;
        throw budget.exceeded;
      }
      await client.query('ROLLBACK').catch(() => (reusable = false));
      if (this.stopping && isPgServerError(err) && err.code === '57014') throw stoppingError();
      if (isPgServerError(err)) throw queryError(err, query.timeoutMs);
      if (err instanceof DomainError) throw err;
      reusable = false;
      throw err;
    } finally {
      // DISCARD ALL drops whatever the statement left on the session
      // (advisory locks, LISTENs, prepared statements, settings). The revoke
      // ends before the connection goes back to the pool: a query taking it
      // next writes its own grant, which a late revoke would delete.
      await Promise.all([
        reusable ? client.query('DISCARD ALL').catch(() => (reusable = false)) : Promise.resolve(),
        pid !== null ? this.revoke(pid) : Promise.resolve(),
      ]);
      client.release(!reusable);
      if (pid !== null) this.running.delete(pid);
    }
  }

  /** The reader connection's backend pid, which keys its row in kl_query_grants. */
  private async backendPid(client: PoolClient): Promise<number> {
    let pid = this.pids.get(client);
    if (pid === undefined) {
      const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      pid = rows[0].pid;
      this.pids.set(client, pid);
    }
    return pid;
  }

  /**
   * Writes, as the owner, what the reader backend `pid` may see
   * (migrations/013_auth.sql): the views of kl_query filter by its pid.
   */
  private async grant(pid: number, scope: QueryScope): Promise<void> {
    await this.owner.query(
      `INSERT INTO kl_query_grants (pid, patterns, all_streams) VALUES ($1, $2, $3)
       ON CONFLICT (pid) DO UPDATE SET patterns = EXCLUDED.patterns, all_streams = EXCLUDED.all_streams`,
      [pid, scope.patterns, scope.allStreams],
    );
  }

  /** Whether the reader backend `pid` holds, or waits for, an advisory lock. */
  private async holdsAdvisoryLock(pid: number): Promise<boolean> {
    const rows = await this.owner.query<{ held: boolean }>(
      "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = $1 AND locktype = 'advisory') AS held",
      [pid],
    );
    return rows[0]?.held === true;
  }

  /**
   * Cancels the statement the reader backend `pid` runs. As the owner when
   * it may (a superuser: migration 039 then took the signalling functions
   * from every other role, the reader included); else from a connection of
   * the reader's own, since a role may always cancel its own backends and
   * the owner need not be a superuser or a member of the reader's role.
   */
  private async cancel(pid: number): Promise<void> {
    const asOwner = await this.owner
      .query('SELECT pg_cancel_backend($1)', [pid])
      .then(() => true)
      .catch(() => false);
    if (asOwner) return;
    const reader = new Client(connectionOptions(readerUrl(this.databaseUrl)));
    reader.on('error', () => undefined);
    try {
      await reader.connect();
      await reader.query('SELECT pg_cancel_backend($1)', [pid]);
    } finally {
      await reader.end().catch(() => undefined);
    }
  }

  private async revoke(pid: number): Promise<void> {
    await this.owner
      .query('DELETE FROM kl_query_grants WHERE pid = $1', [pid])
      .catch((err: unknown) => this.logger.warn({ err }, 'could not clear a query grant'));
  }

  /**
   * Through a cursor when the statement is a query; anything a cursor cannot
   * hold (EXPLAIN, SHOW, or statements PostgreSQL will refuse anyway) runs
   * as sent, so the user sees PostgreSQL's own verdict on it.
   */
  private async execute(client: PoolClient, query: SqlQuery): Promise<QueryArrayResult> {
    // the savepoint kl_query was set as the transaction began (run)
    try {
      await client.query(extended({ text: CURSOR_PREFIX + query.sql, values: query.params }));
    } catch (err) {
      if (!isPgServerError(err)) throw err;
      if (err.code !== '42601' && err.code !== '0A000') throw shifted(err);
      await client.query('ROLLBACK TO SAVEPOINT kl_query');
      return client.query(extended({ text: query.sql, values: query.params, rowMode: 'array' }));
    }
    return client.query({
      text: `FETCH FORWARD ${query.maxRows + 1} FROM kl_query`,
      rowMode: 'array',
    });
  }

  /**
   * Each column's type as PostgreSQL spells it (`format_type`). A built-in
   * type's oid and name never change, so those are asked once per service;
   * other types (a domain or enum dropped and made again) every time.
   */
  private async columnTypes(
    client: PoolClient,
    result: QueryArrayResult,
  ): Promise<{ name: string; type: string }[]> {
    const fields = result.fields ?? [];
    const unknown = [...new Set(fields.map((f) => f.dataTypeID))].filter(
      (oid) => !this.builtinTypes.has(oid),
    );
    const names = new Map<number, string>();
    if (unknown.length > 0) {
      const { rows } = await client.query<{ oid: number; name: string }>(
        'SELECT oid::int AS oid, format_type(oid, NULL) AS name FROM pg_type WHERE oid = ANY($1::oid[])',
        [unknown],
      );
      for (const r of rows) {
        names.set(r.oid, r.name);
        if (r.oid < FIRST_NORMAL_OID) this.builtinTypes.set(r.oid, r.name);
      }
    }
    return fields.map((f) => ({
      name: f.name,
      type: this.builtinTypes.get(f.dataTypeID) ?? names.get(f.dataTypeID) ?? String(f.dataTypeID),
    }));
  }

  private async connect(): Promise<PoolClient> {
    try {
      await (this.ready ??= this.prepare());
      return await this.pool!.connect();
    } catch (err) {
      // A replica with another spelling of the server URL may have reset the
      // password; derive and set it again once before giving up.
      if ((err as { code?: string }).code !== '28P01') throw this.unavailable(err);
      try {
        await (this.ready = this.prepare());
        return await this.pool!.connect();
      } catch (again) {
        throw this.unavailable(again);
      }
    }
  }

  private unavailable(err: unknown): DomainError {
    this.ready = null;
    return new DomainError(
      'SERVER.UNAVAILABLE',
      `the query role ${READER_ROLE} cannot connect: ${(err as Error).message}`,
      {},
      { cause: err },
    );
  }

  /** The reader pool, once the first query opened it (for metrics). */
  get readerPool(): Pool | null {
    return this.pool;
  }

  private async prepare(): Promise<void> {
    await ensureReaderPassword(this.databaseUrl);
    if (this.pool) return;
    this.pool = survivingConnectionLoss(
      new Pool({
        ...connectionOptions(readerUrl(this.databaseUrl)),
        max: 10,
        idleTimeoutMillis: 30_000,
        application_name: 'kilolock-query',
        types: queryTypeParsers,
        ...(this.owner.guard ? { verify: this.owner.guard.verifyThrough(this.owner.pool) } : {}),
      }),
    );
  }
}

function advisoryLockRefusal(): DomainError {
  return new DomainError(
    QUERY_FORBIDDEN,
    'the query took (or waited for) an advisory lock and was cancelled: advisory locks are ' +
      "kld's own, and one held by a query would hold up its writes",
  );
}

/**
 * Forces the extended protocol even without parameters: it accepts exactly
 * one statement, so `RESET ROLE; SELECT …` is refused by PostgreSQL itself.
 * (`queryMode` is missing from pg's typings.)
 */
function extended<C extends QueryConfig | QueryArrayConfig>(config: C): C {
  return Object.assign(config, { queryMode: 'extended' });
}

/** Positions PostgreSQL reports for the DECLARE are shifted by our prefix. */
function shifted(err: PgServerError): PgServerError {
  if (!err.position) return err;
  const position = Number(err.position) - CURSOR_PREFIX.length;
  return Object.assign(err, { position: position > 0 ? String(position) : undefined });
}

/**
 * Waits for every one of `steps`, then fails with the first failure: none is
 * left running unseen (a grant still in flight when the revoke is sent could
 * land after it and stay behind).
 */
async function settled(steps: Promise<unknown>[]): Promise<void> {
  const outcomes = await Promise.allSettled(steps);
  const failed = outcomes.find((o): o is PromiseRejectedResult => o.status === 'rejected');
  if (failed) throw failed.reason;
}

function stoppingError(): DomainError {
  return new DomainError(
    'SERVER.UNAVAILABLE',
    'kld is stopping: the query was not run to its end; send it again (another replica, or this one once restarted)',
  );
}
