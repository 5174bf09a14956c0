import * as fs from 'node:fs';
import * as path from 'node:path';

// CPU accounting from /proc (Linux): USER_HZ is 100.
const TICK_MS = 10;

function procStat(pid: number): { ppid: number; cpuMs: number } | null {
  try {
    const text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    // fields[0] is field 3 (state): ppid is field 4, utime 14, stime 15.
    return { ppid: Number(fields[1]), cpuMs: (Number(fields[11]) + Number(fields[12])) * TICK_MS };
  } catch {
    return null;
  }
}

/** CPU time (user + system) of one process so far, in ms; NaN when gone. */
export function processCpuMs(pid: number): number {
  return procStat(pid)?.cpuMs ?? NaN;
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
 * CPU of a process and its live children (PostgreSQL's backends are children
 * of the postmaster); a backend that exited meanwhile takes its time with it.
 */
export function processTreeCpuMs(root: number): number {
  let total = procStat(root)?.cpuMs ?? 0;
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const s = procStat(Number(entry));
    if (s && s.ppid === root) total += s.cpuMs;
  }
  return total;
}

/**
 * CPU of the postmaster's live children that serve database `name` (their
 * command line names it: backends and autovacuum workers), so two builds on
 * two databases of one server are told apart.
 */
export function databaseCpuMs(postmaster: number, name: string): number {
  let total = 0;
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const s = procStat(Number(entry));
    if (!s || s.ppid !== postmaster) continue;
    try {
      const cmd = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (cmd.split(/[\s\0]/).includes(name)) total += s.cpuMs;
    } catch {
      // exited while we looked
    }
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
