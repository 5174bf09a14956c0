import * as fs from 'node:fs';
import * as path from 'node:path';

// CPU accounting from /proc (Linux): USER_HZ is 100.
const TICK_MS = 10;

function procStat(pid: number): { ppid: number; cpuMs: number; reapedMs: number } | null {
  try {
    const text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    // fields[0] is field 3 (state): ppid is field 4, utime 14, stime 15,
    // cutime 16, cstime 17 (children that exited and were waited for).
    return {
      ppid: Number(fields[1]),
      cpuMs: (Number(fields[11]) + Number(fields[12])) * TICK_MS,
      reapedMs: (Number(fields[13]) + Number(fields[14])) * TICK_MS,
    };
  } catch {
    return null;
  }
}

/** CPU time (user + system) of one process so far, in ms; NaN when gone. */
export function processCpuMs(pid: number): number {
  return procStat(pid)?.cpuMs ?? NaN;
}

/**
 * A process's CPU split (ms, /proc): user and system time of the whole
 * process, and the main thread's share (its task has the process's id);
 * the rest is its other threads (for Node: V8's garbage-collector workers,
 * libuv's pool). NaNs when it is gone.
 */
export function processCpuSplit(pid: number): { user: number; system: number; main: number } {
  try {
    const fields = (file: string) => {
      const text = fs.readFileSync(file, 'utf8');
      return text.slice(text.lastIndexOf(')') + 2).split(' ');
    };
    const all = fields(`/proc/${pid}/stat`);
    const main = fields(`/proc/${pid}/task/${pid}/stat`);
    return {
      user: Number(all[11]) * TICK_MS,
      system: Number(all[12]) * TICK_MS,
      main: (Number(main[11]) + Number(main[12])) * TICK_MS,
    };
  } catch {
    return { user: NaN, system: NaN, main: NaN };
  }
}

/**
 * CPU (user + system, ms) of this process's children that have exited and
 * been waited for, with everything they in turn waited for: a `kl plan` run
 * to completion counts itself and its terraform processes.
 */
export function reapedChildrenCpuMs(): number {
  const text = fs.readFileSync('/proc/self/stat', 'utf8');
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // cutime is field 16, cstime 17.
  return (Number(fields[13]) + Number(fields[14])) * TICK_MS;
}

/**
 * CPU of a process, its live children (PostgreSQL's backends are children
 * of the postmaster) and the children it has reaped: a backend that exits
 * moves its time from the live sum into the root's, so the figure never
 * goes back (up to the instant between its exit and its reaping).
 */
export function processTreeCpuMs(root: number): number {
  const self = procStat(root);
  let total = self ? self.cpuMs + self.reapedMs : 0;
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const s = procStat(Number(entry));
    if (s && s.ppid === root) total += s.cpuMs;
  }
  return total;
}

/** The embedded postmaster started in `dir` (EmbeddedPostgres.start), or null. */
export function postmasterOf(dir: string): number | null {
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmd = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (path.basename(cmd[0]) === 'postgres' && cmd.includes(path.join(dir, 'pgdata'))) {
        return Number(entry);
      }
    } catch {
      // exited while we looked
    }
  }
  return null;
}

/**
 * CPU of the postmaster's children that serve database `name` (their command
 * line names it: backends and autovacuum workers), so two builds on two
 * databases of one server are told apart. It samples them every `everyMs`
 * and sums, per process, the most it saw, so what exited backends spent is
 * kept. A backend that exits loses only what it spent since the last sample
 * (the pool closes idle connections; a VACUUM's connection may go).
 */
export class DatabaseCpuMeter {
  private readonly seen = new Map<number, number>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly postmaster: number,
    private readonly name: string,
    everyMs = 250,
  ) {
    this.timer = setInterval(() => this.sample(), everyMs);
    this.timer.unref();
    this.sample();
  }

  /** CPU (ms) of the database's backends since the meter started, those gone included. */
  totalMs(): number {
    this.sample();
    let total = 0;
    for (const ms of this.seen.values()) total += ms;
    return total;
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private sample(): void {
    for (const entry of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      const pid = Number(entry);
      const s = procStat(pid);
      if (!s || s.ppid !== this.postmaster) continue;
      try {
        const cmd = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8');
        if (!cmd.split(/[\s\0]/).includes(this.name)) continue;
      } catch {
        continue; // exited while we looked
      }
      // A backend's first sample counts from its start: it began after the meter did or holds little.
      this.seen.set(pid, Math.max(this.seen.get(pid) ?? 0, s.cpuMs));
    }
  }
}

/**
 * Time a process's threads have run on a CPU so far, in ns (/proc schedstat:
 * the scheduler's own clock, not 10 ms ticks), so a few hundred requests of
 * well under a millisecond each are measured exactly. NaN when it is gone.
 */
export function processCpuNs(pid: number): number {
  try {
    let total = 0;
    for (const task of fs.readdirSync(`/proc/${pid}/task`)) {
      total += Number(fs.readFileSync(`/proc/${pid}/task/${task}/schedstat`, 'utf8').split(' ')[0]);
    }
    return total;
  } catch {
    return NaN;
  }
}

/**
 * The same (ns) for each live backend of the postmaster serving database
 * `name`, by pid: the difference of two readings, pid by pid, is what the
 * database spent between them (a backend that exited meanwhile is left out).
 */
export function databaseBackendsCpuNs(postmaster: number, name: string): Map<number, number> {
  const out = new Map<number, number>();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (procStat(pid)?.ppid !== postmaster) continue;
    try {
      const cmd = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (!cmd.split(/[\s\0]/).includes(name)) continue;
      out.set(pid, processCpuNs(pid));
    } catch {
      // exited while we looked
    }
  }
  return out;
}
