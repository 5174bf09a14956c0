import * as fs from 'node:fs';
import type { Server } from 'node:net';

/**
 * File descriptors kld keeps for itself: its database pools (20 + 10), the
 * LISTEN and guard connections, a query's cancel, the files it reads
 * (migrations, the dashboard), the gRPC listener and its connections, stdio.
 * About 45 are open at rest.
 */
export const RESERVED_FDS = 256;

/**
 * How many connections the HTTP server holds at once: the open-file limit
 * less what kld needs for itself. Each connection is a file descriptor, and
 * one that never sends a byte is kept up to 66 s (connection-drain.ts): a
 * client opening connections faster than that took every descriptor, and
 * then kld could open neither a database connection nor a file (/readyz
 * answered 503). Past the bound a new connection is closed at once; the
 * ones already open are served. Only reached at the limit where kld would
 * fail anyway; null (no bound) where the limit cannot be read.
 */
export function connectionBound(limitsText = readLimits()): number | null {
  const line = limitsText?.split('\n').find((l) => l.startsWith('Max open files'));
  const soft =
    line === undefined ? NaN : Number(line.slice('Max open files'.length).trim().split(/\s+/)[0]);
  if (!Number.isSafeInteger(soft) || soft <= 0) return null; // "unlimited" or unreadable
  return soft > 2 * RESERVED_FDS ? soft - RESERVED_FDS : Math.floor(soft / 2);
}

export function boundConnections(server: Server, bound = connectionBound()): void {
  if (bound !== null) server.maxConnections = bound;
}

function readLimits(): string | null {
  try {
    return fs.readFileSync('/proc/self/limits', 'utf8');
  } catch {
    return null; // not Linux
  }
}
