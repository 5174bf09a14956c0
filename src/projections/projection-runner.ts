import { PoolClient } from 'pg';
import { comparePositions, LogPosition } from '../domain/shared/event';
import { readLogAfter } from '../infrastructure/event-store/postgres-event-store';
import { EVENTS_CHANNEL } from '../infrastructure/event-store/postgres-event-store';
import { Notifier } from '../infrastructure/event-store/notifier';
import type { Logger } from '../infrastructure/logging/logger';
import { Database } from '../infrastructure/postgres/database';
import { Projector } from './projector';
import { RebuildRunningError } from './rebuild-running.error';
import {
  createShadowTables,
  dropShadowTables,
  SHADOW_SCHEMA,
  swapInShadowTables,
  useShadowTables,
} from './shadow-tables';

export const CHECKPOINTS_CHANNEL = 'kl_checkpoints';
const BATCH = 500;
/** Events in one batch that make its tables' statistics worth refreshing. */
const ANALYZE_AFTER = 2000;
// A writer waiting for its own events takes bigger bites: a first commit of
// a big state is tens of thousands of events, and every batch is a
// transaction of its own that re-reads the checkpoint.
const CATCH_UP_BATCH = 5000;
// Namespace for the per-projector advisory locks (pg_advisory_xact_lock(int, int)).
const LOCK_NAMESPACE = 7_300_422;
// In that namespace: the session lock one rebuild holds from start to end.
const REBUILD_LOCK = 'kl:rebuild';
// A rebuild's own batches lock the shadow copies, never the live projector.
const shadowLock = (projector: Projector) => `kl:rebuild:${projector.name}`;
// How long the swap waits for a table a query is reading before it lets go
// (and readers queued behind it through) to try again; under PostgreSQL's
// default deadlock_timeout (1 s), so a reader stuck between the swap's locks
// is never the one cancelled.
const SWAP_LOCK_TIMEOUT_MS = 500;
// How long a rebuild keeps trying to swap before it gives up (queries run
// for at most 5 minutes).
const SWAP_PATIENCE_MS = 10 * 60_000;

export class ProjectionTimeoutError extends Error {
  constructor(position: LogPosition, timeoutMs: number) {
    super(`read models did not reach position ${position.globalPosition} within ${timeoutMs} ms`);
    this.name = 'ProjectionTimeoutError';
  }
}

/**
 * Runs every projector against the log. Any number of kld replicas may run it
 * at once: each batch takes the projector's transaction-scoped advisory lock,
 * re-reads the checkpoint under it and advances it compare-and-set, so two
 * replicas never apply the same batch twice.
 */
export class ProjectionRunner {
  private readonly abort = new AbortController();
  private loops: Promise<void>[] = [];
  private readonly kicks = new Set<() => void>();
  private readonly analyzing = new Set<string>();
  private readonly analyzeAgain = new Set<string>();

  constructor(
    private readonly db: Database,
    private readonly notifier: Notifier,
    private readonly projectors: readonly Projector[],
    private readonly logger: Logger,
  ) {}

  start(): void {
    this.loops = this.projectors.map((p) => this.loop(p));
  }

  async stop(): Promise<void> {
    this.abort.abort();
    this.kick();
    await Promise.allSettled(this.loops);
  }

  /** Wake the loops now instead of at their next poll. */
  kick(): void {
    for (const k of [...this.kicks]) k();
  }

  private async loop(projector: Projector): Promise<void> {
    const signal = this.abort.signal;
    while (!signal.aborted) {
      let applied = 0;
      try {
        applied = await this.runBatch(projector);
      } catch (err) {
        this.logger.error({ err, projector: projector.name }, 'projection batch failed; retrying');
        await sleep(1000, signal);
        continue;
      }
      if (applied < BATCH) await this.idle(signal);
    }
  }

  private idle(signal: AbortSignal): Promise<void> {
    const local = new AbortController();
    const kick = () => local.abort();
    this.kicks.add(kick);
    const onAbort = () => local.abort();
    signal.addEventListener('abort', onAbort, { once: true });
    return this.notifier.wait(EVENTS_CHANNEL, 250, local.signal).finally(() => {
      this.kicks.delete(kick);
      signal.removeEventListener('abort', onAbort);
    });
  }

  /** Applies at most one batch; returns how many events it consumed. */
  async runBatch(projector: Projector, limit = BATCH): Promise<number> {
    const { consumed, handled } = await this.db.transaction((tx) =>
      this.batchIn(tx, projector, limit),
    );
    if (handled >= ANALYZE_AFTER) this.analyzeSoon(projector);
    return consumed;
  }

  /**
   * A bulk commit (an import, a first apply) can grow a read model from
   * nothing to tens of thousands of rows long before autovacuum looks at it;
   * until then the planner believes the tables are empty and can pick plans
   * that turn a 100 ms query into minutes. So statistics (and the visibility
   * map, which index-only scans need) are refreshed right after such a batch,
   * off the request path.
   */
  private analyzeSoon(projector: Projector): void {
    if (projector.tables.length === 0) return;
    // One at a time per projector; batches landing meanwhile get one more pass.
    if (this.analyzing.has(projector.name)) {
      this.analyzeAgain.add(projector.name);
      return;
    }
    this.analyzing.add(projector.name);
    this.db
      .query(`VACUUM (ANALYZE) ${projector.tables.join(', ')}`)
      .catch((err: unknown) =>
        this.logger.warn({ err, projector: projector.name }, 'VACUUM (ANALYZE) failed'),
      )
      .finally(() => {
        this.analyzing.delete(projector.name);
        if (this.analyzeAgain.delete(projector.name)) this.analyzeSoon(projector);
      });
  }

  private async batchIn(
    tx: PoolClient,
    projector: Projector,
    limit: number,
    lock = projector.name,
  ): Promise<{ consumed: number; handled: number }> {
    await tx.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [LOCK_NAMESPACE, lock]);
    const from = await readCheckpoint(tx, projector.name);
    const events = await readLogAfter(tx, from, limit, projector.handles);
    if (events.length === 0) return { consumed: 0, handled: 0 };
    const handled = events.filter((e) => projector.handles.includes(e.type));
    if (handled.length) await projector.apply(handled, tx);
    const to = events[events.length - 1].position;
    const { rowCount } = await tx.query(
      `UPDATE kl_checkpoints SET transaction_id = $2::xid8, global_position = $3, updated_at = now()
        WHERE projection = $1 AND transaction_id = $4::xid8 AND global_position = $5`,
      [
        projector.name,
        to.transactionId.toString(),
        to.globalPosition.toString(),
        from.transactionId.toString(),
        from.globalPosition.toString(),
      ],
    );
    if (rowCount !== 1) throw new Error(`checkpoint of ${projector.name} moved under us`);
    await tx.query('SELECT pg_notify($1, $2)', [CHECKPOINTS_CHANNEL, projector.name]);
    return { consumed: events.length, handled: handled.length };
  }

  /** Positions of every projector (the slowest decides read-your-writes). */
  async checkpoints(): Promise<Map<string, LogPosition>> {
    const rows = await this.db.query<{ projection: string; tx: string; gp: string }>(
      `SELECT projection, transaction_id::text AS tx, global_position AS gp FROM kl_checkpoints
        WHERE projection = ANY($1)`,
      [this.projectors.map((p) => p.name)],
    );
    const map = new Map<string, LogPosition>();
    for (const r of rows) {
      map.set(r.projection, { transactionId: BigInt(r.tx), globalPosition: BigInt(r.gp) });
    }
    return map;
  }

  async reached(position: LogPosition): Promise<boolean> {
    const cps = await this.checkpoints();
    return this.projectors.every((p) => {
      const cp = cps.get(p.name);
      return cp !== undefined && comparePositions(cp, position) >= 0;
    });
  }

  /**
   * Resolves once every read model includes the event at `position`; the
   * write path awaits this before answering (read-your-writes on any replica).
   */
  async waitForPosition(position: LogPosition, timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (await this.reached(position)) return;
      if (Date.now() > deadline) throw new ProjectionTimeoutError(position, timeoutMs);
      // Do the work here rather than wait for a loop: the caller is blocked on
      // it. Projectors are independent (own tables, own checkpoint, own lock),
      // so they catch up side by side, each on its own connection.
      await Promise.all(
        this.projectors.map(async (p) => {
          while ((await this.runBatch(p, CATCH_UP_BATCH)) === CATCH_UP_BATCH) {
            /* keep going until this projector is caught up */
          }
        }),
      );
      if (await this.reached(position)) return;
      await this.notifier.wait(CHECKPOINTS_CHANNEL, 20);
    }
  }

  /** True when no projector has committed events left to apply. */
  async caughtUp(): Promise<boolean> {
    const rows = await this.db.query<{ tx: string; gp: string }>(
      `SELECT transaction_id::text AS tx, global_position AS gp FROM kl_events
        WHERE transaction_id < (SELECT pg_snapshot_xmin(pg_current_snapshot()))
        ORDER BY transaction_id DESC, global_position DESC LIMIT 1`,
    );
    if (rows.length === 0) return true;
    return this.reached({ transactionId: BigInt(rows[0].tx), globalPosition: BigInt(rows[0].gp) });
  }

  /**
   * Replays the whole log into every read model without taking the service
   * down: the log is replayed into empty copies of the tables (see
   * shadow-tables.ts) while the live tables keep serving reads and the live
   * projection keeps applying new events to them. Then one short transaction
   * holding every projector's lock catches the copies up with what was
   * committed meanwhile and swaps them in with the checkpoints, so nothing
   * the live tables had is missing from the new ones. Readers wait only for
   * that swap. One rebuild at a time (RebuildRunningError otherwise).
   */
  async rebuild(): Promise<{ projector: string; events: number }[]> {
    const session = await this.db.pool.connect();
    let broken = false;
    try {
      const { rows } = await session.query<{ ok: boolean }>(
        'SELECT pg_try_advisory_lock($1, hashtext($2)) AS ok',
        [LOCK_NAMESPACE, REBUILD_LOCK],
      );
      if (!rows[0].ok) throw new RebuildRunningError();
      try {
        return await this.rebuildBeside();
      } finally {
        await dropShadowTables(this.db).catch((err: unknown) =>
          this.logger.warn({ err }, `could not drop schema ${SHADOW_SCHEMA}`),
        );
        await session
          .query('SELECT pg_advisory_unlock($1, hashtext($2))', [LOCK_NAMESPACE, REBUILD_LOCK])
          .catch(() => (broken = true)); // closing the connection releases it
      }
    } finally {
      session.release(broken);
    }
  }

  private async rebuildBeside(): Promise<{ projector: string; events: number }[]> {
    const tables = this.projectors.flatMap((p) => p.tables);
    const live = await createShadowTables(this.db, tables);
    const events = new Map(this.projectors.map((p) => [p.name, 0]));
    const replay = async (projector: Projector) => {
      const n = await this.replayBeside(projector, live);
      events.set(projector.name, events.get(projector.name)! + n);
    };
    for (const projector of this.projectors) {
      await replay(projector);
      this.logger.info({ projector: projector.name }, 'projection replayed beside the live one');
    }
    if (tables.length) await this.db.query(`VACUUM (ANALYZE) ${shadowNames(tables)}`);
    // What was committed while the others replayed, so that the swap itself
    // (which holds up the live projection) only has the last moment to do.
    for (const projector of this.projectors) await replay(projector);
    const tail = await this.swapIn(live, tables);
    this.kick();
    return this.projectors.map((p) => {
      const replayed = events.get(p.name)! + (tail.get(p.name) ?? 0);
      this.logger.info({ projector: p.name, events: replayed }, 'projection rebuilt');
      return { projector: p.name, events: replayed };
    });
  }

  /** Applies the log to `projector`'s copies, one transaction per batch, until it is caught up. */
  private async replayBeside(projector: Projector, live: string): Promise<number> {
    let total = 0;
    let analyzed = false;
    for (;;) {
      const { consumed, handled } = await this.db.transaction(async (tx) => {
        await useShadowTables(tx, live);
        return this.batchIn(tx, projector, CATCH_UP_BATCH, shadowLock(projector));
      });
      if (consumed === 0) return total;
      total += consumed;
      // The copies start empty, like a fresh database: once they hold rows,
      // the planner must know it (see analyzeSoon).
      if (!analyzed && handled >= ANALYZE_AFTER && projector.tables.length) {
        await this.db.query(`ANALYZE ${shadowNames(projector.tables)}`);
        analyzed = true;
      }
    }
  }

  /** Catches the copies up and swaps them in; returns the events caught up per projector. */
  private async swapIn(live: string, tables: readonly string[]): Promise<Map<string, number>> {
    const deadline = Date.now() + SWAP_PATIENCE_MS;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.db.transaction(async (tx) => {
          // Live batches (and writers waiting for their events) pause here.
          for (const p of this.projectors) {
            await tx.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [
              LOCK_NAMESPACE,
              p.name,
            ]);
          }
          await useShadowTables(tx, live);
          const tail = new Map<string, number>();
          for (const p of this.projectors) {
            let total = 0;
            for (;;) {
              const n = (await this.batchIn(tx, p, CATCH_UP_BATCH, shadowLock(p))).consumed;
              if (n === 0) break;
              total += n;
            }
            tail.set(p.name, total);
          }
          await swapInShadowTables(
            tx,
            live,
            tables,
            this.projectors.map((p) => p.name),
            SWAP_LOCK_TIMEOUT_MS,
          );
          return tail;
        });
      } catch (err) {
        // lock_not_available (lock_timeout), or chosen to break a deadlock
        const busy = ['55P03', '40P01'].includes((err as { code?: string }).code ?? '');
        if (!busy || Date.now() > deadline) throw err;
        const pause = Math.min(5000, 250 * 2 ** attempt) * (0.5 + Math.random() / 2);
        this.logger.info({ attempt, pauseMs: Math.round(pause) }, 'read models busy; swap later');
        await new Promise((r) => setTimeout(r, pause));
      }
    }
  }
}

function shadowNames(tables: readonly string[]): string {
  return tables.map((t) => `${SHADOW_SCHEMA}.${t}`).join(', ');
}

async function ensureCheckpointRow(tx: PoolClient, name: string): Promise<void> {
  await tx.query(
    'INSERT INTO kl_checkpoints (projection) VALUES ($1) ON CONFLICT (projection) DO NOTHING',
    [name],
  );
}

async function readCheckpoint(tx: PoolClient, name: string): Promise<LogPosition> {
  await ensureCheckpointRow(tx, name);
  const { rows } = await tx.query<{ tx: string; gp: string }>(
    `SELECT transaction_id::text AS tx, global_position AS gp FROM kl_checkpoints
      WHERE projection = $1`,
    [name],
  );
  return { transactionId: BigInt(rows[0].tx), globalPosition: BigInt(rows[0].gp) };
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(t);
        resolve();
      },
      { once: true },
    );
  });
}
