import type { OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import type { Logger } from '../logging/logger';
import type { Database } from '../postgres/database';
import { RefreshReadModel } from '../read-models/refresh-read-model';
import { ServerRefreshService } from './server-refresh.service';

// Session advisory lock (namespace, key): one replica refreshes at a time.
const LOCK_NAMESPACE = 7_300_423;
const LOCK_KEY = 1;
const MAX_TICK_MS = 60_000;

export interface RefreshSchedule {
  everyMs: number;
  states: readonly string[];
}

/**
 * KL_REFRESH_EVERY / KL_REFRESH_STATES. Every replica ticks; the one holding
 * the advisory lock refreshes each listed state whose last run (from any
 * client, kl or kld) started at least `everyMs` ago, so replicas together
 * refresh a state once per period, not once per replica. A failing state is
 * logged and does not stop the others.
 */
export class RefreshScheduler implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly stop = new AbortController();
  private loop: Promise<void> | null = null;
  /** When this replica last tried each state: a state that cannot start a run is not retried every tick. */
  private readonly attempted = new Map<string, number>();

  constructor(
    private readonly schedule: RefreshSchedule | null,
    private readonly db: Database,
    private readonly runs: RefreshReadModel,
    private readonly refresh: ServerRefreshService,
    private readonly logger: Logger,
  ) {}

  onApplicationBootstrap(): void {
    if (this.schedule === null || this.schedule.states.length === 0) return;
    this.logger.info(
      { everyMs: this.schedule.everyMs, states: this.schedule.states },
      'periodic refresh enabled',
    );
    this.loop = this.run(this.schedule);
  }

  async onApplicationShutdown(): Promise<void> {
    this.stop.abort();
    await this.loop;
  }

  private async run(schedule: RefreshSchedule): Promise<void> {
    const tick = Math.min(schedule.everyMs, MAX_TICK_MS);
    while (!this.stop.signal.aborted) {
      try {
        await this.tick(schedule);
      } catch (err) {
        this.logger.error({ err }, 'periodic refresh tick failed');
      }
      await sleep(tick, this.stop.signal);
    }
  }

  /** Refreshes the due states if this replica gets the lock; false when another has it. */
  async tick(schedule: RefreshSchedule): Promise<boolean> {
    const client = await this.db.pool.connect();
    let locked = false;
    try {
      const { rows } = await client.query<{ ok: boolean }>(
        'SELECT pg_try_advisory_lock($1, $2) AS ok',
        [LOCK_NAMESPACE, LOCK_KEY],
      );
      locked = rows[0].ok;
      if (!locked) return false;
      for (const state of schedule.states) {
        if (this.stop.signal.aborted) break;
        const started = (await this.runs.lastStarted(state))?.getTime() ?? 0;
        const last = Math.max(started, this.attempted.get(state) ?? 0);
        if (Date.now() - last < schedule.everyMs) continue;
        this.attempted.set(state, Date.now());
        this.logger.info({ state }, 'periodic refresh starting');
        try {
          await this.refresh.run(
            state,
            {
              dryRun: false,
              caller: { actor: 'kld-scheduler', correlationId: `refresh-${state}` },
            },
            this.stop.signal,
          );
        } catch {
          // logged by the service; the next state still gets its turn
        }
      }
      return true;
    } finally {
      if (locked) {
        await client
          .query('SELECT pg_advisory_unlock($1, $2)', [LOCK_NAMESPACE, LOCK_KEY])
          .catch(() => undefined);
      }
      client.release();
    }
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
