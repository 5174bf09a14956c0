import type { RefreshResult } from '../../domain/refresh';
import type { FlatInstance, InstanceObjectV4 } from '../../domain/terraform';
import type { RefreshServerPort } from './refresh-server.port';
import type { RefreshProgress } from './refresh-report';
import type { RefreshProvider } from './provider-opener.port';
import type { SecretMask } from './secret-mask';

/** What refreshing one instance found. */
export interface InstanceResult {
  result: RefreshResult;
  /** The refreshed object; null when gone or failed. */
  instance: InstanceObjectV4 | null;
}

export interface RunContextOptions {
  runId: string;
  /** Every managed instance, in document order: the order results are sent in. */
  instances: readonly FlatInstance[];
  /** Results are sent to the server in batches of this size. */
  batchSize: number;
  onProgress?: (progress: RefreshProgress) => void;
  /** The run's environment values: masked in every error before it is kept or sent. */
  mask: SecretMask;
}

/**
 * Mutable bookkeeping of one run, shared by its provider groups: the
 * outcome of every instance so far, the providers open now (to stop them on
 * a halt), and the results not yet sent, which go to the server in batches
 * while the refresh goes on.
 *
 * Results are sent in document order whatever order the reads finish in
 * (groups, provider processes and reads in flight race each other): a result
 * waits until every instance before it has one, and batches are cut at
 * `batchSize`, so the recorded events are the same for any pool size,
 * parallelism or concurrency. A halt sends what it has, still in order.
 *
 * Every outcome passes here, so this is where a provider's error text is
 * masked (`SecretMask`) before kl's report, kld or anyone reading the run sees it.
 */
export class RunContext {
  readonly halt = new AbortController();
  readonly open = new Set<RefreshProvider>();
  readonly outcomes = new Map<FlatInstance, InstanceResult>();
  readonly runId: string;
  readonly total: number;
  private done = 0;
  private readonly position = new Map<FlatInstance, number>();
  /** Results by document position, until every one before them is in. */
  private readonly held: (RefreshResult | undefined)[];
  private released = 0;
  private pending: RefreshResult[] = [];
  private flushing: Promise<void> = Promise.resolve();
  private flushError: unknown = null;

  constructor(
    private readonly server: RefreshServerPort,
    private readonly options: RunContextOptions,
  ) {
    this.runId = options.runId;
    this.total = options.instances.length;
    options.instances.forEach((flat, i) => this.position.set(flat, i));
    this.held = new Array<RefreshResult | undefined>(this.total);
  }

  get halted(): boolean {
    return this.halt.signal.aborted;
  }

  record(flat: FlatInstance, found: InstanceResult): void {
    const outcome = this.masked(found);
    const at = this.position.get(flat);
    if (at === undefined || this.outcomes.has(flat)) {
      throw new Error(`bug: ${flat.address} is not awaiting an outcome in this run`);
    }
    this.outcomes.set(flat, outcome);
    this.done++;
    this.held[at] = outcome.result;
    while (this.released < this.total && this.held[this.released] !== undefined) {
      this.pending.push(this.held[this.released]!);
      this.held[this.released++] = undefined;
    }
    this.flush(false);
    this.options.onProgress?.({
      done: this.done,
      total: this.total,
      address: flat.address,
      outcome: outcome.result.outcome,
    });
  }

  private masked(found: InstanceResult): InstanceResult {
    const error = found.result.error;
    if (error === undefined) return found;
    return { ...found, result: { ...found.result, error: this.options.mask.text(error) } };
  }

  /** Stops every open provider: in-flight reads return at once and the processes can then close. */
  stopAll(): void {
    this.halt.abort();
    for (const p of this.open) p.stop().catch(() => undefined);
  }

  /** Every recorded result sent (those behind an instance left unread too); rethrows the first failed send. */
  async drain(): Promise<void> {
    for (; this.released < this.total; this.released++) {
      const result = this.held[this.released];
      if (result) this.pending.push(result);
      this.held[this.released] = undefined;
    }
    this.flush(true);
    await this.flushing;
    if (this.flushError) throw this.flushError;
  }

  /** Full batches (and with `all` the rest) go out one at a time, in order. */
  private flush(all: boolean): void {
    const size = this.options.batchSize;
    while (this.pending.length >= size || (all && this.pending.length > 0)) {
      this.send(this.pending.splice(0, size));
    }
  }

  private send(batch: RefreshResult[]): void {
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
