import { Client } from 'pg';

/** One backend seen active in one sample of `pg_stat_activity`. */
export interface ActivityRow {
  /** performance.now() of the sample. */
  at: number;
  pid: number;
  /**
   * `wait_event_type/wait_event`, `CPU` when active and waiting for nothing,
   * or `idle in transaction` (a client holding its locks while it works).
   */
  wait: string;
  /** How long the statement had run when sampled, ms. */
  runningMs: number;
  query: string;
}

/**
 * Samples `pg_stat_activity` every `everyMs` for one database (and the
 * server's own processes: WAL writer, checkpointer, autovacuum), on a
 * connection of its own, to tell what a slow statement waited for: IO,
 * WALWrite, an LWLock or a lock, or nothing (CPU, or a core it did not get),
 * and which transactions were open but idle (their client busy elsewhere).
 */
export class ActivitySampler {
  private readonly rows: ActivityRow[] = [];
  private timer: NodeJS.Timeout | undefined;
  private busy = false;

  private constructor(
    private readonly client: Client,
    private readonly database: string,
  ) {}

  static async start(databaseUrl: string, everyMs = 20): Promise<ActivitySampler> {
    const client = new Client({ connectionString: databaseUrl });
    await client.connect();
    const sampler = new ActivitySampler(client, new URL(databaseUrl).pathname.slice(1));
    sampler.timer = setInterval(() => void sampler.sample(), everyMs);
    return sampler;
  }

  /** performance.now(), to mark windows. */
  now(): number {
    return performance.now();
  }

  private async sample(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      const at = this.now();
      const r = await this.client.query<{
        pid: number;
        wait: string | null;
        running_ms: number | null;
        query: string;
        backend_type: string;
      }>(
        `SELECT pid, CASE WHEN state = 'idle in transaction' THEN 'idle in transaction'
                          ELSE wait_event_type || '/' || wait_event END AS wait,
                extract(epoch FROM clock_timestamp() - query_start) * 1000 AS running_ms,
                left(regexp_replace(query, '\\s+', ' ', 'g'), 90) AS query, backend_type
           FROM pg_stat_activity
          WHERE pid <> pg_backend_pid()
            AND ((datname = $1 AND state IN ('active', 'idle in transaction')) OR
                 (backend_type <> 'client backend' AND wait_event_type IS DISTINCT FROM 'Activity'))`,
        [this.database],
      );
      for (const row of r.rows) {
        this.rows.push({
          at,
          pid: row.pid,
          wait: row.wait ?? 'CPU',
          runningMs: Number(row.running_ms ?? 0),
          query: row.backend_type === 'client backend' ? row.query : `(${row.backend_type})`,
        });
      }
    } catch {
      // A sample lost is only a hole in the picture.
    } finally {
      this.busy = false;
    }
  }

  /**
   * What was active in [from, to]: samples per wait (a sample is one backend
   * seen once, so 10 samples at 20 ms is about 200 ms of one backend), and
   * the longest-running statements with the waits they were seen in.
   */
  summary(from: number, to: number, top = 6): string {
    const inside = this.rows.filter((r) => r.at >= from && r.at <= to);
    const waits = new Map<string, number>();
    for (const r of inside) waits.set(r.wait, (waits.get(r.wait) ?? 0) + 1);
    const byStatement = new Map<string, { ms: number; waits: Map<string, number> }>();
    for (const r of inside) {
      const key = `${r.pid} ${r.query}`;
      const s = byStatement.get(key) ?? { ms: 0, waits: new Map<string, number>() };
      s.ms = Math.max(s.ms, r.runningMs);
      s.waits.set(r.wait, (s.waits.get(r.wait) ?? 0) + 1);
      byStatement.set(key, s);
    }
    const lines = [
      `samples by wait: ${[...waits]
        .sort((a, b) => b[1] - a[1])
        .map(([w, n]) => `${w} ${n}`)
        .join(', ')}`,
      ...[...byStatement]
        .sort((a, b) => b[1].ms - a[1].ms)
        .slice(0, top)
        .map(
          ([key, s]) =>
            `  ${Math.round(s.ms)} ms [${[...s.waits].map(([w, n]) => `${w}×${n}`).join(' ')}] ${key}`,
        ),
    ];
    return lines.join('\n');
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    while (this.busy) await new Promise((r) => setTimeout(r, 5));
    await this.client.end().catch(() => undefined);
  }
}
