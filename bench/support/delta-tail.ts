import * as fs from 'node:fs';
import { Client } from 'pg';

/**
 * What else happened during a bench's slowest requests: the embedded
 * PostgreSQL's log (autovacuum and autoanalyze, checkpoints, statements
 * slower than KL_BENCH_PG_LOG_MS) and kld's `--trace-gc` lines, as intervals
 * of wall-clock time laid over each request's own.
 */

/** Something that took [start, end] (Date.now() ms) beside the requests. */
export interface Happening {
  start: number;
  end: number;
  /** Short, e.g. `autovacuum kl_raw_state_chunks 120 ms`. */
  label: string;
}

/** One timed request of the bench, with what it cost. */
export interface TimedRequest {
  /** Its index in the phase (0-based). */
  index: number;
  /** Instances changed. */
  changed: number;
  start: number;
  end: number;
  ms: number;
  kldCpuMs: number;
  pgCpuMs: number;
}

const PG_LINE = /^(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d\.\d{3}) UTC \[\d+\] (?:LOG|WARNING):\s+(.*)$/;

/**
 * Collects the embedded server's log lines (EmbeddedPostgres passes each one
 * to its logger at debug level as `{ postgres: line }`): a pino destination
 * that keeps those and forwards everything at `level` or above to stderr.
 */
export class PostgresLog {
  readonly happenings: Happening[] = [];
  /** A multi-line entry (a statement's text) is read from its first line only. */
  constructor(private readonly level: number) {}

  write(text: string): void {
    for (const line of text.split('\n')) {
      if (!line) continue;
      let entry: { level?: number; postgres?: string };
      try {
        entry = JSON.parse(line) as typeof entry;
      } catch {
        continue;
      }
      if (typeof entry.postgres === 'string') this.take(entry.postgres);
      if ((entry.level ?? 0) >= this.level) process.stderr.write(`${line}\n`);
    }
  }

  private take(line: string): void {
    const m = PG_LINE.exec(line);
    if (!m) return;
    const end = Date.parse(`${m[1]}T${m[2]}Z`);
    const text = m[3];
    let span: number | null = null;
    let label: string | null = null;
    const duration = /^duration: ([\d.]+) ms\s+(?:statement|execute [^:]*): (.*)$/.exec(text);
    const auto = /^automatic (vacuum|analyze) of table "([^"]+)"/.exec(text);
    const checkpoint = /^checkpoint complete: .*total=([\d.]+) s/.exec(text);
    if (duration) {
      span = Number(duration[1]);
      label = `statement ${Math.round(span)} ms: ${duration[2].replace(/\s+/g, ' ').slice(0, 60)}`;
    } else if (auto) {
      // The log line is written when it ends; its text carries the elapsed time.
      const elapsed = /elapsed: ([\d.]+) s/.exec(text);
      span = elapsed ? Number(elapsed[1]) * 1000 : 0;
      label = `auto${auto[1]} ${auto[2].split('.').pop()} ${Math.round(span)} ms`;
    } else if (checkpoint) {
      span = Number(checkpoint[1]) * 1000;
      label = `checkpoint ${Math.round(span)} ms`;
    }
    if (label !== null && span !== null) this.happenings.push({ start: end - span, end, label });
  }
}

/**
 * The settings that make the embedded server log what the tail report lays
 * over the requests; `slowMs` also logs every statement slower than that.
 */
export async function logForTail(serverUrl: string, slowMs: number | null): Promise<void> {
  const client = new Client({ connectionString: serverUrl });
  await client.connect();
  try {
    await client.query(`ALTER SYSTEM SET log_timezone = 'UTC'`);
    await client.query(`ALTER SYSTEM SET log_line_prefix = '%m [%p] '`);
    await client.query('ALTER SYSTEM SET log_autovacuum_min_duration = 0');
    await client.query('ALTER SYSTEM SET log_checkpoints = on');
    if (slowMs !== null) {
      await client.query(`ALTER SYSTEM SET log_min_duration_statement = ${Math.floor(slowMs)}`);
    }
    await client.query('SELECT pg_reload_conf()');
  } finally {
    await client.end();
  }
}

// `[pid:0xisolate]   12345 ms: Mark-Compact 300.1 (400.2) -> 250.3 (390.1) MB, pooled: 0 MB, 12.34 / 0.00 ms ...`
const GC_LINE =
  /^\[\d+:0x[0-9a-f]+\]\s+(\d+) ms: ([A-Za-z-]+(?: \(reduce\))?) .*? MB, ([\d.]+) \/ [\d.]+ ms/;

/** When a process started (Date.now() ms), from /proc: to 10 ms, and the boot time to 10 ms. */
export function processStartedAt(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Field 22, starttime, in clock ticks (USER_HZ, 100) after boot.
  const ticks = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
  const uptimeS = Number(fs.readFileSync('/proc/uptime', 'utf8').split(' ')[0]);
  return Date.now() - uptimeS * 1000 + ticks * 10;
}

/**
 * kld's `--trace-gc` lines as happenings. V8 times them from the isolate's
 * start, taken as the process's (`origin`), so a pause may be placed early by
 * node's own start-up. Scavenges are kept only from 5 ms.
 */
export class GcTrace {
  private readonly seen: { at: number; pause: number; kind: string; line: string }[] = [];
  /** Date.now() of V8's time 0; set once kld runs (its lines before are kept meanwhile). */
  origin = 0;

  line(text: string): void {
    const m = GC_LINE.exec(text);
    if (!m) return;
    const pause = Number(m[3]);
    if (m[2] === 'Scavenge' && pause < 5) return;
    this.seen.push({
      at: Number(m[1]),
      pause,
      kind: m[2],
      line: text.replace(/^\[[^\]]*\]\s+/, ''),
    });
  }

  get happenings(): Happening[] {
    return this.seen.map((g) => ({
      start: this.origin + g.at,
      end: this.origin + g.at + g.pause,
      label: `${g.kind} ${g.pause.toFixed(0)} ms`,
    }));
  }

  /** The full collections' own lines (heap before and after, V8's reason). */
  get majors(): { at: number; line: string }[] {
    return this.seen
      .filter((g) => g.kind.startsWith('Mark'))
      .map((g) => ({ at: this.origin + g.at + g.pause, line: g.line }));
  }
}

/** The `n` slowest requests, slowest first, each with what overlapped it. */
export function slowest(
  requests: readonly TimedRequest[],
  happenings: readonly Happening[],
  n: number,
): { request: TimedRequest; during: Happening[] }[] {
  return [...requests]
    .sort((a, b) => b.ms - a.ms)
    .slice(0, n)
    .map((request) => ({
      request,
      during: happenings.filter((h) => h.start < request.end && h.end > request.start),
    }));
}

/** Report lines: the slowest requests and, for the whole phase, how often each kind overlapped. */
export function tailReport(
  requests: readonly TimedRequest[],
  happenings: readonly Happening[],
  n: number,
): string[] {
  const lines: string[] = [];
  const list = slowest(requests, happenings, n);
  for (const { request: r, during } of list) {
    lines.push(
      `    v${r.index} (${r.changed} changed): ${r.ms.toFixed(0)} ms, kld CPU ${r.kldCpuMs.toFixed(0)} ms, ` +
        `PostgreSQL CPU ${r.pgCpuMs.toFixed(0)} ms${during.length ? `; ${during.map((h) => h.label).join(', ')}` : ''}`,
    );
  }
  const kinds = new Map<string, { all: number; slow: number }>();
  const slowSet = new Set(list.map((s) => s.request.index));
  for (const r of requests) {
    const seen = new Set(
      happenings
        .filter((h) => h.start < r.end && h.end > r.start)
        .map((h) => h.label.split(' ').slice(0, 2).join(' ').replace(/ \d+$/, '')),
    );
    for (const kind of seen) {
      const k = kinds.get(kind) ?? { all: 0, slow: 0 };
      k.all++;
      if (slowSet.has(r.index)) k.slow++;
      kinds.set(kind, k);
    }
  }
  if (kinds.size) {
    lines.push(
      `    overlapping (slowest ${list.length} / all ${requests.length}): ` +
        [...kinds]
          .sort((a, b) => b[1].all - a[1].all)
          .map(([kind, k]) => `${kind} ${k.slow} / ${k.all}`)
          .join('; '),
    );
  }
  return lines;
}
