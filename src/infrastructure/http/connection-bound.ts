import * as fs from 'node:fs';
import type { Server, Socket } from 'node:net';

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

/**
 * One budget of connections for kld's two listeners: HTTP's are refused by
 * Node past `maxConnections`, gRPC's here (grpc-js has no such bound, so
 * kld accepts them itself and hands them over). Each gRPC connection takes
 * one from HTTP's bound, and a gRPC connection is taken only while the two
 * together are under it and gRPC holds less than half of it, so a flood on
 * one port leaves the other served: before, gRPC connections were not
 * counted, and 600 silent ones at a limit of 512 files left kld no
 * descriptor for its database (/readyz 503). null: no bound.
 */
export class ConnectionBudget {
  private http: Server | null = null;
  private httpOpen = 0;
  private grpcOpen = 0;

  constructor(readonly bound: number | null = connectionBound()) {}

  /** Counts the HTTP server's connections and keeps its bound at the budget less gRPC's. */
  watchHttp(server: Server): void {
    this.http = server;
    server.on('connection', (socket: Socket) => {
      this.httpOpen++;
      socket.once('close', () => this.httpOpen--);
    });
    this.resize();
  }

  /** Whether a new gRPC connection may be held; if so it is counted until it closes. */
  admitGrpc(socket: Socket): boolean {
    if (
      this.bound !== null &&
      (this.httpOpen + this.grpcOpen >= this.bound || this.grpcOpen >= Math.floor(this.bound / 2))
    ) {
      return false;
    }
    this.grpcOpen++;
    socket.once('close', () => {
      this.grpcOpen--;
      this.resize();
    });
    this.resize();
    return true;
  }

  private resize(): void {
    // At least one: Node reads 0 as no bound at all.
    if (this.http && this.bound !== null) {
      this.http.maxConnections = Math.max(1, this.bound - this.grpcOpen);
    }
  }
}

function readLimits(): string | null {
  try {
    return fs.readFileSync('/proc/self/limits', 'utf8');
  } catch {
    return null; // not Linux
  }
}
