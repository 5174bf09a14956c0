import type { Client, PoolClient } from 'pg';

/**
 * How often a stop cancels again what its sessions still run. PostgreSQL
 * drops a cancel that finds the backend reading its next command: a
 * statement sent just before the stop but not read yet (a backend not
 * scheduled for a moment, on a loaded machine) then ran whole, however long
 * (a batch waiting for a lock another replica held).
 */
const RECANCEL_MS = 100;
/** Bounds the cancels of one stop (about 10 s): sessions that never leave are not cancelled for good. */
const RECANCEL_ROUNDS = 100;

/** A statement of a stopped session, refused before it was sent. */
export class SessionsStoppedError extends Error {
  constructor() {
    super('kld is stopping: the statement was not sent');
    this.name = 'SessionsStoppedError';
  }
}

/**
 * Connections doing work a stop may cut short: work whose transaction,
 * rolled back, loses nothing (a projector's batch commits its rows with
 * its checkpoint, and the next start applies the same events again).
 * `stop()` cancels the statement each one runs (pg_cancel_backend, from a
 * connection of its own: the pool may have none to spare) and refuses every
 * statement not sent yet, so the transaction fails at once instead of
 * running to its end; a kld stopping then waits for none of them. The
 * cancel is sent again while a session is still at work (RECANCEL_MS): what
 * it runs then was sent before the stop (nothing is sent after it), and a
 * first cancel that came before its backend read it was dropped.
 * Without the refusal, a batch preparing its next statement when the
 * cancel came (a COPY of 20,000 rows) would send it and run it whole.
 */
export class StoppableSessions {
  /** The connections in use, with their backend's pid. */
  private readonly running = new Map<PoolClient, number>();
  private stopping = false;
  /** The cancel under way: a session it may name is not given back before it is sent. */
  private cancelling: Promise<void> | null = null;
  /** Wakes the cancels' wait between two rounds once no session is at work. */
  private allLeft: (() => void) | null = null;

  constructor(private readonly connect: () => Promise<Client>) {}

  /**
   * `client` (checked out by the caller) seen through a view that refuses
   * each statement once `stop()` was called; the caller ends the
   * transaction and calls `leave` before it releases the connection.
   */
  enter(client: PoolClient): PoolClient {
    if (this.stopping) throw new SessionsStoppedError();
    this.running.set(client, backendPid(client));
    return refusingOnceStopped(client, () => this.stopping);
  }

  /** `client`'s work is over; resolves once a cancel that may name it has been sent. */
  async leave(client: PoolClient): Promise<void> {
    this.running.delete(client);
    if (this.running.size === 0) this.allLeft?.();
    // What the connection runs next (the caller's ROLLBACK, the next
    // user's statement) must not be what that cancel hits.
    await this.cancelling;
  }

  /**
   * Refuses every statement from now on and cancels those running; resolves
   * once the first cancel is sent, with how many sessions were at work. The
   * cancel is sent again while sessions are at work (RECANCEL_MS).
   */
  async stop(): Promise<number> {
    if (this.stopping) return 0;
    this.stopping = true;
    const working = this.running.size;
    if (working === 0) return 0;
    let firstSent!: () => void;
    const sent = new Promise<void>((resolve) => (firstSent = resolve));
    void this.cancelWhileAtWork(firstSent);
    await sent;
    return working;
  }

  private async cancelWhileAtWork(firstSent: () => void): Promise<void> {
    let canceller: Client | null = null;
    try {
      canceller = await this.connect();
      for (let round = 0; round < RECANCEL_ROUNDS; round++) {
        // Read at each round: sessions that ended meanwhile are left alone.
        const pids = [...this.running.values()].filter((pid) => pid > 0);
        if (pids.length === 0) return;
        this.cancelling = canceller
          .query('SELECT pg_cancel_backend(pid) FROM unnest($1::int[]) AS pid', [pids])
          .then(
            () => undefined,
            () => undefined,
          );
        await this.cancelling;
        firstSent();
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, RECANCEL_MS);
          this.allLeft = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        this.allLeft = null;
      }
    } catch {
      // No connection to cancel from (the database is away): the sessions fail on their own.
    } finally {
      firstSent();
      await canceller?.end().catch(() => undefined);
    }
  }
}

/** The backend serving `client` (node-postgres keeps it from the server's BackendKeyData). */
function backendPid(client: PoolClient): number {
  return (client as unknown as { processID?: number | null }).processID ?? 0;
}

/** `client`, whose `query` refuses once `stopped()`: a COPY stream by throwing, a statement by rejecting. */
function refusingOnceStopped(client: PoolClient, stopped: () => boolean): PoolClient {
  const query = (...args: unknown[]): unknown => {
    if (stopped()) {
      const submittable = typeof (args[0] as { submit?: unknown } | null)?.submit === 'function';
      if (submittable) throw new SessionsStoppedError();
      return Promise.reject(new SessionsStoppedError());
    }
    return (client.query as (...a: unknown[]) => unknown)(...args);
  };
  return new Proxy(client, {
    get(target, property) {
      if (property === 'query') return query;
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function'
        ? (value as (...a: unknown[]) => unknown).bind(target)
        : value;
    },
  });
}
