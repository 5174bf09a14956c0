import { AsyncLocalStorage } from 'node:async_hooks';
import { LRUCache } from 'lru-cache';
import { Client, escapeIdentifier, type Pool, type PoolClient } from 'pg';
import { DomainError } from '../../domain/shared/domain-error';
import type { Logger } from '../logging/logger';
import { connectionOptions } from './connection-options';

/**
 * The read models that may be UNLOGGED tables (KL_UNLOGGED_READ_MODELS):
 * the bulk of a first commit's WAL, rows that are only a function of the
 * log (the projectors state-resource-lifecycles, state-raw and
 * state-resource-edges own exactly these). Never the log, the checkpoints,
 * anything a decision reads (locks, reservations, quotas, tokens, snapshots).
 */
export const UNLOGGED_READ_MODELS = [
  'resources',
  'outputs',
  'raw_state',
  'raw_state_chunks',
  'resource_edges',
  'resource_edge_sources',
] as const;

/** One row while the read models are whole (migrations/037_read_models_intact.sql). */
export const INTACT_MARKER = 'kl_read_models_intact';
const MARKER_QUERY = `SELECT EXISTS (SELECT 1 FROM ${INTACT_MARKER}) AS intact`;
const MARK_INTACT = `INSERT INTO ${INTACT_MARKER} VALUES (true) ON CONFLICT DO NOTHING`;

// Session advisory lock namespace of the persistence switch (serving-lock.ts uses 7_300_424).
const SWITCH_LOCK = [7_300_425, 1] as const;

/** A read of the read models while they are being rebuilt after a crash emptied them. */
export class ReadModelsRebuildingError extends DomainError {
  constructor() {
    super(
      'SERVER.UNAVAILABLE',
      'read models are being rebuilt from the event log (PostgreSQL lost them in a crash); retry shortly',
    );
    this.name = 'ReadModelsRebuildingError';
  }
}

/**
 * Makes the read models (and their marker) UNLOGGED or logged, all in one
 * transaction, under a lock so that replicas starting together switch once.
 * `ALTER TABLE … SET [UN]LOGGED` rewrites a table that changes: rows stay.
 * Returns the tables it changed.
 */
export async function setReadModelPersistence(
  client: Client | PoolClient,
  unlogged: boolean,
): Promise<string[]> {
  const tables = [...UNLOGGED_READ_MODELS, INTACT_MARKER];
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock($1, $2)', [...SWITCH_LOCK]);
    const { rows } = await client.query<{ name: string; unlogged: boolean }>(
      `SELECT c.relname AS name, c.relpersistence = 'u' AS unlogged
         FROM unnest($1::text[]) AS t(name) JOIN pg_class c ON c.oid = to_regclass(t.name)`,
      [tables],
    );
    if (rows.length !== tables.length)
      throw new Error('read model tables are missing: migrate first');
    const changed = rows.filter((r) => r.unlogged !== unlogged).map((r) => r.name);
    for (const name of changed) {
      await client.query(
        `ALTER TABLE ${escapeIdentifier(name)} SET ${unlogged ? 'UNLOGGED' : 'LOGGED'}`,
      );
    }
    await client.query('COMMIT');
    return changed;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}

/** A connection of its own, outside every pool: the persistence switch's, the rebuild's witness. */
export async function ownConnection(url: string): Promise<Client> {
  const client = new Client(connectionOptions(url));
  client.on('error', () => undefined); // a lost connection fails its next statement
  await client.connect();
  return client;
}

/** setReadModelPersistence on a connection of its own, logging what it changed. */
export async function switchReadModelPersistence(
  url: string,
  unlogged: boolean,
  logger: Logger,
): Promise<void> {
  const client = await ownConnection(url);
  try {
    const changed = await setReadModelPersistence(client, unlogged);
    if (changed.length) {
      logger.info(
        { tables: changed },
        `read models made ${unlogged ? 'UNLOGGED (no WAL)' : 'logged'} (KL_UNLOGGED_READ_MODELS)`,
      );
    }
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * Notices read models a crash has emptied, and refuses to read them until
 * they are rebuilt.
 *
 * A crash (or a failover) ends every connection, so every statement after
 * it runs on a connection opened after it. Each connection of a guarded
 * pool asks for the marker's row before the pool hands it out (`verify`):
 * without the row, the guard is `lost` before anything reads on that
 * connection, and stays so until `restored()`. While lost, `assertIntact`
 * throws ReadModelsRebuildingError (503), except in work run by `exempt`
 * (the rebuild itself), and a statement on a guarded pool's connections
 * that reads or writes a read model is refused before it is sent.
 *
 * Which statements those are, PostgreSQL says: a statement naming none of
 * the read models, nor a view or function over them, touches none and goes
 * as it is; one that does name one (`outputs` is also a column of
 * `state_versions`) is prepared once on a connection of the guard's own, in
 * a transaction rolled back at once, and refused if PostgreSQL locked one of
 * the read models for it (parsing and rewriting lock every relation a
 * statement reads or writes, through views too), or if it calls a function
 * whose body names one (a function's body is only opened when it runs), or
 * if it cannot be prepared at all (`COPY`, DDL, several statements). The
 * answer is kept per statement text. None of this runs while the read
 * models are whole: a guarded statement then costs one boolean test.
 */
export class ReadModelGuard {
  private isLost = false;
  private readonly exemption = new AsyncLocalStorage<true>();
  /** `exempt` calls running. */
  private exempting = 0;
  private readonly onLost: (() => void)[] = [];
  /** Names of the read models and of the views and functions over them (learnNames). */
  private named: RegExp | null = null;
  /** Names of the functions among them. */
  private functions: RegExp | null = null;
  /** The schema the read models live in (the guarded pool's). */
  private home = 'public';
  /** Whether a statement naming a read model touches one, as PostgreSQL said (by text). */
  private readonly verdicts = new LRUCache<string, boolean>({ max: VERDICTS_KEPT });
  /** Verdicts being asked for, by text: one question per text however many wait. */
  private readonly asking = new Map<string, Promise<boolean>>();
  /** The guard's own connection, while lost: the questions, one at a time. */
  private prober: Promise<Client> | null = null;
  private probing: Promise<unknown> = Promise.resolve();

  /**
   * `connect`: a connection of the guard's own, as a guarded pool's would
   * be (same server, role and search path); without it, every statement
   * naming a read model is refused while lost.
   */
  constructor(
    private readonly logger: Logger,
    private readonly connect?: () => Promise<Client>,
  ) {}

  get lost(): boolean {
    return this.isLost;
  }

  /** Calls `fn` each time the guard finds the read models emptied. */
  whenLost(fn: () => void): void {
    this.onLost.push(fn);
  }

  /**
   * The names whose statements are refused while lost: the read models and
   * everything over them (views, functions), found once the schema is current.
   */
  async learnNames(pool: Pool): Promise<void> {
    const { rows } = await pool.query<{ name: string; fn: boolean; home: string }>(
      NAMES_OVER_READ_MODELS,
      [[...UNLOGGED_READ_MODELS]],
    );
    this.named = wordsOf(rows.map((r) => r.name));
    this.functions = wordsOf(rows.filter((r) => r.fn).map((r) => r.name));
    if (rows.length > 0) this.home = rows[0].home;
    this.verdicts.clear();
  }

  /** pg-pool's `verify` for a pool whose connections may read the read models. */
  readonly verify = (client: PoolClient, done: (err?: Error) => void): void => {
    this.wrap(client);
    client.query<{ intact: boolean }>(MARKER_QUERY).then(
      ({ rows }) => {
        if (!rows[0].intact) this.markLost();
        done();
      },
      (err: Error) => done(err),
    );
  };

  /**
   * For a pool of its own (the query role's): asks `pool` (a guarded one)
   * whether the read models are whole, as `verify` does.
   */
  verifyThrough(pool: Pool): (client: PoolClient, done: (err?: Error) => void) => void {
    return (_client, done) => {
      pool.query<{ intact: boolean }>(MARKER_QUERY).then(
        ({ rows }) => {
          if (!rows[0].intact) this.markLost();
          done();
        },
        (err: Error) => done(err),
      );
    };
  }

  assertIntact(): void {
    if (this.isLost && !this.exemption.getStore()) throw new ReadModelsRebuildingError();
  }

  /** Runs `fn` with the read models readable even while lost (the rebuild). */
  async exempt<T>(fn: () => Promise<T>): Promise<T> {
    this.exempting += 1;
    try {
      return await this.exemption.run(true, fn);
    } finally {
      // While an AsyncLocalStorage is enabled, Node runs a hook on every
      // promise made (about a tenth of kld's CPU per GET): once no exempt
      // work runs, off (the next `run` enables it again), and whatever `fn`
      // left running is no longer exempt. Not while lost: the rebuild's work
      // may outlive `fn` until `restored`.
      if (--this.exempting === 0 && !this.isLost) this.exemption.disable();
    }
  }

  /**
   * For a transaction on a connection outside the guarded pools (the query
   * role's), after its statement ran: refuses, while lost, if that statement
   * touched a read model, by the locks PostgreSQL holds for the transaction
   * (a relation read or written stays locked until its end, whether named,
   * behind a view or read by a function).
   */
  async assertUntouched(tx: Pick<PoolClient, 'query'>): Promise<void> {
    if (!this.isLost || this.exemption.getStore()) return;
    const { rows } = await tx.query<{ touched: boolean }>(TOUCHED, [
      [...UNLOGGED_READ_MODELS],
      this.home,
    ]);
    if (rows[0].touched) throw new ReadModelsRebuildingError();
  }

  /** Ends the guard's own connection, if it has one (kld stopping). */
  async close(): Promise<void> {
    const prober = this.prober;
    this.prober = null;
    await prober?.then((c) => c.end()).catch(() => undefined);
  }

  /** The rebuild has written the marker back on a connection older than itself. */
  restored(): void {
    if (!this.isLost) return;
    this.isLost = false;
    void this.close();
    // What the rebuild left running is exempt no longer, and the promise
    // hook goes off, as `exempt` does once the read models are whole.
    if (this.exempting === 0) this.exemption.disable();
    this.logger.info('read models rebuilt after PostgreSQL lost them; serving them again');
  }

  private markLost(): void {
    if (this.isLost) return;
    this.isLost = true;
    this.logger.warn(
      'read models are empty (PostgreSQL lost its unlogged tables in a crash): rebuilding them from the log; reads answer 503 meanwhile',
    );
    for (const fn of this.onLost) fn();
  }

  /**
   * Refuses, while lost, a guarded pool's own `query` naming a guarded
   * relation before it takes a connection: pg-pool ends the connection of
   * any statement that fails on it, so a refusal on the connection (wrap)
   * would cost every refused read a new connection, and its marker
   * question, while the rebuild runs.
   */
  guardPool(pool: Pool): void {
    this.refuseWith(pool as unknown as { query: unknown });
  }

  /** Refuses, while lost, a statement naming a guarded relation (any form node-postgres takes). */
  private wrap(client: PoolClient): void {
    this.refuseWith(client as unknown as { query: unknown });
  }

  private refuseWith(target: { query: unknown }): void {
    const query = (target.query as (...args: unknown[]) => unknown).bind(target);
    // Statements of this connection waiting for PostgreSQL's verdict, and
    // the moment the last of them was handed on: a later statement waits
    // its turn behind them, so that statements reach the server in the
    // order they were sent (node-postgres queues them in call order, and a
    // caller may send the next before the last is answered).
    let held = 0;
    let handed: Promise<unknown> = Promise.resolve();
    target.query = (...args: unknown[]): unknown => {
      const free = !this.isLost || this.exemption.getStore() !== undefined;
      const verdict = free ? false : this.verdict(args[0]);
      if (held === 0 && verdict === false) return query(...args);
      const callback = args.find((a) => typeof a === 'function') as
        ((e: Error) => void) | undefined;
      if (held === 0 && verdict === true) {
        const err = new ReadModelsRebuildingError();
        if (callback) return void process.nextTick(() => callback(err));
        if (typeof (args[0] as { submit?: unknown }).submit === 'function') throw err;
        return Promise.reject(err);
      }
      // Sent once PostgreSQL has answered for it and every statement held
      // before it is on its way. Restored meanwhile, it goes.
      held++;
      const turn = Promise.all([handed, verdict]);
      const sent = turn.then(([, refused]) => {
        held--;
        if (refused && this.isLost) throw new ReadModelsRebuildingError();
        return query(...args);
      });
      // A promise's reactions run in the order they were added: the next
      // statement's turn comes once this one has been handed on.
      handed = turn.then(() => undefined);
      if (!callback) return sent;
      sent.catch((err: Error) => callback(err));
      return undefined;
    };
  }

  /**
   * Whether the statement `first` (node-postgres's first argument) is to be
   * refused while lost: at once when its text names no read model (no), or
   * PostgreSQL has answered for that text before; else once it has.
   */
  private verdict(first: unknown): boolean | Promise<boolean> {
    if (!this.named) return true; // names not known yet: refuse everything
    const text = typeof first === 'string' ? first : (first as { text?: unknown } | null)?.text;
    if (typeof text !== 'string' || !this.named.test(text)) return false;
    // A function's body is read only when it runs; a stream (COPY) is sent at once.
    if (this.functions?.test(text)) return true;
    if (typeof (first as { submit?: unknown }).submit === 'function') return true;
    const known = this.verdicts.get(text);
    if (known !== undefined) return known;
    if (!this.connect) return true;
    let asked = this.asking.get(text);
    if (asked === undefined) {
      asked = this.ask(text).finally(() => this.asking.delete(text));
      this.asking.set(text, asked);
    }
    return asked;
  }

  /**
   * Prepares `text` on the guard's own connection, in a transaction rolled
   * back at once, and says whether PostgreSQL locked a read model for it.
   * A statement that cannot be prepared (a utility statement, several
   * statements) is refused; so is one whose question failed otherwise (the
   * connection, a lock not granted in time), without keeping that answer.
   */
  private ask(text: string): Promise<boolean> {
    const asked = this.probing.then(async () => {
      const client = await (this.prober ??= this.connect!());
      await client.query(`BEGIN; SET LOCAL lock_timeout = ${PROBE_LOCK_TIMEOUT_MS}`);
      try {
        try {
          // The extended protocol takes one statement only, as kld's are
          // sent (`queryMode` is missing from pg's typings).
          await client.query(
            Object.assign({ text: `PREPARE kl_guard_probe AS ${text}` }, { queryMode: 'extended' }),
          );
        } catch (err) {
          if (!unpreparable(err)) throw err;
          return true;
        }
        const { rows } = await client.query<{ touched: boolean }>(TOUCHED, [
          [...UNLOGGED_READ_MODELS],
          this.home,
        ]);
        return rows[0].touched;
      } finally {
        await client.query('ROLLBACK; DEALLOCATE ALL');
      }
    });
    this.probing = asked.catch(() => undefined);
    return asked.then(
      (touched) => {
        this.verdicts.set(text, touched);
        return touched;
      },
      (err: unknown) => {
        // Once restored, the connection was ended on purpose and nothing is refused.
        if (this.isLost) {
          this.logger.warn({ err }, 'could not ask PostgreSQL what a statement reads; refused');
        }
        void this.close();
        return true;
      },
    );
  }
}

/** Statement texts whose verdict the guard keeps: kld sends a few hundred distinct ones. */
const VERDICTS_KEPT = 2000;

/** How long the guard's question waits for a lock (the rebuild's swap holds them briefly). */
const PROBE_LOCK_TIMEOUT_MS = 2000;

/**
 * Whether this transaction holds a lock on one of the read models ($1) of
 * schema $2 (by the catalog, which every role may read: the query role
 * may not look names up in kld's schema).
 */
const TOUCHED = `
  SELECT EXISTS (
    SELECT 1 FROM pg_catalog.pg_locks l
      JOIN pg_catalog.pg_class c ON c.oid = l.relation
      JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     WHERE l.pid = pg_catalog.pg_backend_pid() AND l.locktype = 'relation'
       AND c.relname = ANY ($1::text[]) AND n.nspname = $2
  ) AS touched`;

/** PostgreSQL refused to prepare the statement: not one PREPARE takes (syntax, feature). */
function unpreparable(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (code.startsWith('42') || code.startsWith('0A'));
}

/** A case-insensitive whole-word match of any of `names`; null for none. */
function wordsOf(names: string[]): RegExp | null {
  const words = [...new Set(names)].map((n) => n.replace(/\W/g, '\\$&'));
  return words.length ? new RegExp(`\\b(${words.join('|')})\\b`, 'i') : null;
}

/**
 * The read models' names, and those of every view over them (transitively)
 * and of every function whose body names one of them (`fn`), with the
 * schema the read models live in.
 */
const NAMES_OVER_READ_MODELS = `
  WITH RECURSIVE over(oid) AS (
    SELECT to_regclass(t) FROM unnest($1::text[]) AS t
    UNION
    SELECT r.ev_class
      FROM over JOIN pg_depend d ON d.refobjid = over.oid
      JOIN pg_rewrite r ON r.oid = d.objid
     WHERE d.classid = 'pg_rewrite'::regclass AND d.refclassid = 'pg_class'::regclass
  )
  SELECT c.relname AS name, false AS fn, current_schema() AS home
    FROM over JOIN pg_class c ON c.oid = over.oid
  UNION
  SELECT p.proname, true, current_schema() FROM pg_proc p
   WHERE p.prosrc ~* ('\\m(' || array_to_string($1::text[], '|') || ')\\M')
     AND p.pronamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)`;

/**
 * Runs `rebuild`, then writes the marker's row on `witness`, a connection
 * opened before the rebuild began: that connection still being alive proves
 * no crash came in between (a crash ends every connection), so the tables
 * the rebuild swapped in are whole. A crash during the rebuild fails the
 * marker's statement, and the read models stay lost.
 */
export async function rebuildWitnessed<T>(witness: Client, rebuild: () => Promise<T>): Promise<T> {
  const rebuilt = await rebuild();
  await witness.query(MARK_INTACT);
  return rebuilt;
}

/**
 * After the guard found the read models lost: rebuilds them online (the
 * runner's rebuild, exempt from the guard, witnessed as rebuildWitnessed
 * says). Tries again, with a pause, until it
 * succeeds or `stopped()` says so; a rebuild already running elsewhere (the
 * operator's, another replica's) is waited for, then the marker looked at.
 */
export async function recoverReadModels(options: {
  guard: ReadModelGuard;
  connect: () => Promise<Client>;
  rebuild: () => Promise<unknown>;
  stopped: () => boolean;
  logger: Logger;
}): Promise<void> {
  const { guard, connect, rebuild, stopped, logger } = options;
  for (let attempt = 1; !stopped(); attempt++) {
    let witness: Client | null = null;
    try {
      witness = await connect();
      const { rows } = await witness.query<{ intact: boolean }>(MARKER_QUERY);
      if (!rows[0].intact) {
        const started = Date.now();
        await rebuildWitnessed(witness, () => guard.exempt(rebuild));
        logger.info({ ms: Date.now() - started }, 'read models rebuilt after a crash');
      }
      guard.restored();
      return;
    } catch (err) {
      if (stopped()) return; // cut short by the stop: the next start rebuilds
      const pause = Math.min(30_000, 500 * 2 ** Math.min(attempt, 6));
      logger.warn({ err, attempt, pauseMs: pause }, 'read models not rebuilt yet; trying again');
      await new Promise((r) => setTimeout(r, pause));
    } finally {
      await witness?.end().catch(() => undefined);
    }
  }
}
