import type { RefreshResult } from '../../domain/refresh';
import type { FlatInstance, InstanceObjectV4 } from '../../domain/terraform';
import type { RefreshServerPort } from './refresh-server.port';
import type { RefreshProgress } from './refresh-report';
import type { RefreshProvider } from './provider-opener.port';

/** What refreshing one instance found. */
export interface InstanceResult {
  result: RefreshResult;
  /** The refreshed object; null when gone or failed. */
  instance: InstanceObjectV4 | null;
}

export interface RunContextOptions {
  runId: string;
  /** Managed instances in the state: the progress denominator. */
  total: number;
  /** Results are sent to the server in batches of this size. */
  batchSize: number;
  onProgress?: (progress: RefreshProgress) => void;
}

/**
 * Mutable bookkeeping of one run, shared by its provider groups: the
 * outcome of every instance so far, the providers open now (to stop them on
 * a halt), and the results not yet sent, which go to the server in batches
 * while the refresh goes on.
 */
export class RunContext {
  readonly halt = new AbortController();
  readonly open = new Set<RefreshProvider>();
  readonly outcomes = new Map<FlatInstance, InstanceResult>();
  readonly runId: string;
  readonly total: number;
  private done = 0;
  private pending: RefreshResult[] = [];
  private flushing: Promise<void> = Promise.resolve();
  private flushError: unknown = null;

  constructor(
    private readonly server: RefreshServerPort,
    private readonly options: RunContextOptions,
  ) {
    this.runId = options.runId;
    this.total = options.total;
  }

  get halted(): boolean {
    return this.halt.signal.aborted;
  }

  record(flat: FlatInstance, outcome: InstanceResult): void {
    this.outcomes.set(flat, outcome);
    this.done++;
    this.pending.push(outcome.result);
    if (this.pending.length >= this.options.batchSize) this.flush();
    this.options.onProgress?.({
      done: this.done,
      total: this.total,
      address: flat.address,
      outcome: outcome.result.outcome,
    });
  }

  /** Stops every open provider: in-flight reads return at once and the processes can then close. */
  stopAll(): void {
    this.halt.abort();
    for (const p of this.open) p.stop().catch(() => undefined);
  }

  /** Every recorded result sent; rethrows the first failed send. */
  async drain(): Promise<void> {
    this.flush();
    await this.flushing;
    if (this.flushError) throw this.flushError;
  }

  /** Batches go out one at a time, in order. */
  private flush(): void {
    if (this.pending.length === 0) return;
    const batch = this.pending;
    this.pending = [];
    this.flushing = this.flushing.then(async () => {
      if (this.flushError) return;
      try {
        await this.server.recordResults(this.runId, batch);
      } catch (e) {
        this.flushError = e;
      }
    });
  }
}
