import { Client } from 'pg';
import { connectionOptions, connectTimeoutSeconds } from './connection-options';

/** DI token of the process's Notifier (one LISTEN connection). */
export const NOTIFIER = Symbol('Notifier');

/**
 * Wakes waiters when PostgreSQL NOTIFYs a channel. A wake-up is only a hint
 * that something changed: every waiter also wakes on a timeout and re-reads,
 * so a lost notification (reconnect, another transaction finishing) costs at
 * most one timeout, never an event.
 */
export class Notifier {
  private client: Client | null = null;
  private connecting: Promise<void> | null = null;
  private readonly waiters = new Map<string, Set<() => void>>();
  private readonly notified = new Map<string, number>();
  private closed = false;

  /**
   * `connectTimeoutMs` (the URL's `connect_timeout`, 10 s by default) bounds
   * opening the LISTEN connection: a server that accepts and never answers
   * would otherwise hold every waiter (and the projectors' loops behind
   * them) for as long as the socket lives.
   */
  constructor(
    private readonly url: string,
    private readonly connectTimeoutMs = connectTimeoutSeconds(url) * 1000,
  ) {}

  /**
   * How many notifications of `channel` arrived so far. Take it before
   * reading and pass it to `wait`: a notification that arrives while the
   * read runs then ends the wait at once instead of being missed.
   */
  mark(channel: string): number {
    return this.notified.get(channel) ?? 0;
  }

  async wait(
    channel: string,
    timeoutMs: number,
    signal?: AbortSignal,
    since?: number,
  ): Promise<void> {
    if (this.closed || signal?.aborted) return;
    await this.ensureListening(channel).catch(() => undefined);
    // Closed or aborted while the LISTEN was set up: its wake-up has passed.
    if (this.closed || signal?.aborted) return;
    if (since !== undefined && this.mark(channel) !== since) return;
    await new Promise<void>((resolve) => {
      const set = this.waiters.get(channel) ?? new Set();
      this.waiters.set(channel, set);
      const done = () => {
        clearTimeout(timer);
        set.delete(done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      set.add(done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  /**
   * NOTIFYs `channel` on this notifier's own connection: a hint sent after a
   * commit should not queue behind the pool's writers for a connection.
   * Never throws (a lost hint costs a reader one timeout).
   */
  async notify(channel: string, payload: string): Promise<void> {
    if (this.closed) return;
    try {
      await this.connect();
      if (this.client)
        await this.query(this.client, 'SELECT pg_notify($1, $2)', [channel, payload]);
    } catch {
      // Only a hint.
    }
  }

  private readonly listening = new Set<string>();
  /** The connection's statements, one after the other (node-postgres stops queueing them in v9). */
  private statements: Promise<unknown> = Promise.resolve();

  private query(client: Client, sql: string, params?: unknown[]): Promise<unknown> {
    const run = this.statements.then(() => client.query(sql, params));
    this.statements = run.catch(() => undefined);
    return run;
  }

  private async ensureListening(channel: string): Promise<void> {
    await this.connect();
    if (this.client && !this.listening.has(channel)) {
      this.listening.add(channel);
      await this.query(this.client, `LISTEN ${channel}`);
    }
  }

  private async connect(): Promise<void> {
    if (!this.client && !this.closed) {
      this.connecting ??= (async () => {
        const client = new Client({
          ...connectionOptions(this.url),
          connectionTimeoutMillis: this.connectTimeoutMs,
        });
        client.on('error', () => this.reset());
        client.on('end', () => this.reset());
        client.on('notification', (msg) => this.wake(msg.channel));
        await client.connect();
        // A NOTIFY commits a transaction of its own, flushed to disk like a
        // write; a hint lost in a crash costs nothing (readers poll), so this
        // connection does not wait for the flush.
        await client.query('SET synchronous_commit TO off');
        // Closed while the connection was being opened (a hint sent just
        // before a one-shot command ends): kept, it would hold the process
        // open for ever.
        if (this.closed) await client.end().catch(() => undefined);
        else this.client = client;
      })().finally(() => (this.connecting = null));
      await this.connecting;
    }
  }

  private wake(channel: string): void {
    this.notified.set(channel, this.mark(channel) + 1);
    for (const w of [...(this.waiters.get(channel) ?? [])]) w();
  }

  private reset(): void {
    this.client = null;
    this.listening.clear();
  }

  /** Resolves once no connection is left open, one still being opened included. */
  async close(): Promise<void> {
    this.closed = true;
    for (const set of this.waiters.values()) for (const w of [...set]) w();
    const client = this.client;
    this.reset();
    await Promise.all([
      client?.end().catch(() => undefined),
      this.connecting?.catch(() => undefined),
    ]);
  }
}
