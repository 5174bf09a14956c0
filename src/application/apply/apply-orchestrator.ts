import { KlPlan } from '../../domain/apply/kl-plan';
import { ChangeKind, isWrite, parsePlanJson } from '../../domain/apply/plan-json';
import { ApplyLane } from '../../domain/apply/apply-run.events';
import { applyDelta } from '../../domain/apply/state-slice';
import { DomainError } from '../../domain/shared/domain-error';
import { parseStateDocument, StateDocumentV4 } from '../../domain/terraform';
import { ApplyServerPort, Holder, Reservation, RESERVATION_EXPIRED } from './apply-server.port';
import { Clock, Ids } from '../ports/clock.port';
import { ConfigReader, TerraformWorkspace, TerraformWorkspaces } from './terraform-workspace.port';
import { laneState } from './state-lanes';
import { lastError } from './terraform-output';
import { prepareConfiguration } from './workspace-config';

export interface ApplyOptions {
  leaseSeconds: number;
  /** null: a conflict ends the run at once; else how long to wait for the holders (ms). */
  waitMs: number | null;
  /** How often a waiting run reports who it waits for (ms). */
  waitStatusEveryMs?: number;
  /** How often a waiting run asks again (ms). */
  waitPollMs?: number;
  info?: Record<string, string>;
  onEvent?: (event: ApplyEvent) => void;
}

export type ApplyEvent =
  | {
      type: 'acquired';
      runId: string;
      lane: ApplyLane;
      reservations: Reservation[];
      expiresAt: string;
    }
  | { type: 'waiting'; holders: Holder[]; waitedMs: number }
  | { type: 'applying'; runId: string }
  | { type: 'terraform'; line: string }
  | { type: 'warning'; message: string };

export interface ApplyTimings {
  acquireMs: number;
  sliceMs: number;
  terraformMs: number;
  commitMs: number;
}

export type ApplyOutcome =
  | {
      status: 'committed';
      runId: string;
      /** `state-engine`: committed as the trusted lane's delta (source state-engine). */
      lane: ApplyLane;
      version: number;
      serial: number;
      upserts: number;
      deletes: number;
      timings: ApplyTimings;
    }
  | { status: 'unchanged' }
  | { status: 'conflict'; holders: Holder[] }
  | { status: 'stale'; addresses: { address: string; changedInVersion: number }[] }
  | { status: 'mismatch'; runId: string; message: string }
  | {
      status: 'failed' | 'aborted';
      runId: string | null;
      message: string;
      /** Terraform's resulting state when it ran, so the caller can keep a copy. */
      outputState: string | null;
      /** Whether the server kept `outputState` with the run. */
      keptOnServer: boolean;
    };

const sleep = (ms: number, signal: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });

function message(e: unknown): string {
  return (e instanceof Error ? e.message : String(e)).split('\n')[0];
}

/**
 * `kl apply kl-plan.json` (ADR 0007, revised model): reserve the plan's
 * addresses on the lane the plan chose (ADR 0029 D8: the trusted
 * state-engine lane, whose run terraform sees as a lock, or the full-trunk
 * lane), re-plan against a slice of the trunk in a private directory,
 * refuse anything but the planned write set, apply, check what terraform
 * wrote, and commit only the write set as a row-level delta.
 */
export class ApplyOrchestrator {
  constructor(
    private readonly server: ApplyServerPort,
    private readonly reader: ConfigReader,
    private readonly workspaces: TerraformWorkspaces,
    private readonly clock: Clock,
    private readonly ids: Ids,
  ) {}

  private ms(): number {
    return this.clock.now().getTime();
  }

  async apply(plan: KlPlan, options: ApplyOptions, signal: AbortSignal): Promise<ApplyOutcome> {
    const emit = options.onEvent ?? (() => undefined);
    // The configuration is read before anything is reserved: a broken one costs nobody a wait.
    const config = await prepareConfiguration(this.reader, plan.configDir, plan.files);
    for (const w of config.warnings) emit({ type: 'warning', message: w });

    if (plan.writeSet.length === 0 && plan.outputWrites.length === 0)
      return { status: 'unchanged' };

    const runId = this.ids.uuid();
    const acquireStarted = this.ms();
    const acquired = await this.acquire(plan, runId, options, signal, emit);
    if (acquired !== null) return acquired;
    const acquireMs = this.ms() - acquireStarted;

    // Terraform stops when the caller aborts or when the reservations are lost.
    const stop = new AbortController();
    const onAbort = () => stop.abort();
    signal.addEventListener('abort', onAbort, { once: true });
    let lost: DomainError | null = null;
    const heartbeat = this.heartbeat(plan.state, runId, options.leaseSeconds, (e) => {
      lost = e;
      stop.abort();
    });

    let workspace: TerraformWorkspace | null = null;
    let outputState: string | null = null;
    const ended = async (
      status: 'failed' | 'aborted' | 'mismatch',
      why: string,
    ): Promise<ApplyOutcome> => {
      const keptOnServer = await this.server
        .finish(plan.state, runId, {
          status: status === 'aborted' ? 'aborted' : 'failed',
          errorSummary: why,
          ...(outputState === null ? {} : { outputState }),
        })
        .then(
          () => outputState !== null,
          (e: unknown) => {
            emit({ type: 'warning', message: `could not record the run's end: ${message(e)}` });
            return false;
          },
        );
      if (status === 'mismatch') return { status, runId, message: why };
      return { status, runId, message: why, outputState, keptOnServer };
    };
    const interrupted = (): Promise<ApplyOutcome> | null => {
      if (lost !== null) {
        return ended('failed', `the run's reservations were lost (${message(lost)})`);
      }
      return signal.aborted ? ended('aborted', 'interrupted') : null;
    };

    try {
      const sliceStarted = this.ms();
      // The plan chose the lane: the trusted lane reads the server's slice, the full lane the trunk.
      const { slice } = await laneState(
        this.server,
        plan.lane,
        plan.state,
        config.footprint,
        plan.reservations,
      );
      workspace = await this.workspaces.open(plan.configDir, {
        rootFiles: config.rootFiles,
        state: slice,
        variables: plan.variables,
      });
      const sliceMs = this.ms() - sliceStarted;

      const terraformStarted = this.ms();
      await workspace.init(stop.signal);
      const replanned = parsePlanJson(
        await workspace.plan({ targets: plan.targets, refresh: plan.refresh }, stop.signal),
      );
      const early = interrupted();
      if (early) return await early;
      if (replanned.terraformVersion !== plan.terraformVersion) {
        emit({
          type: 'warning',
          message: `planned with terraform ${plan.terraformVersion}, applying with ${replanned.terraformVersion}`,
        });
      }
      const difference = writeSetDifference(
        plan.changes,
        replanned.changes.filter((c) => isWrite(c.kind)),
      );
      if (difference !== null) {
        return await ended(
          'mismatch',
          `terraform's plan against the current trunk differs from ${plan.state}'s kl plan (${difference}): nothing applied; re-plan`,
        );
      }

      emit({ type: 'applying', runId });
      const result = await workspace.apply(stop.signal, (line) =>
        emit({ type: 'terraform', line }),
      );
      const terraformMs = this.ms() - terraformStarted;
      outputState = await workspace.stateText();
      const late = interrupted();
      if (late) return await late;
      if (!result.ok) {
        return await ended('failed', `terraform apply failed: ${lastError(result.output)}`);
      }
      if (outputState === null) return await ended('failed', 'terraform left no state behind');

      let after: StateDocumentV4;
      try {
        after = parseStateDocument(outputState);
      } catch (e) {
        return await ended('failed', `terraform's resulting state cannot be read: ${message(e)}`);
      }
      const delta = applyDelta({
        slice,
        result: after,
        writeSet: plan.writeSet,
        outputWrites: plan.outputWrites,
      });
      if (delta.violations.length > 0) {
        return await ended(
          'failed',
          `terraform wrote outside the planned write set: ${delta.violations.slice(0, 5).join(', ')}${delta.violations.length > 5 ? ` and ${delta.violations.length - 5} more` : ''}; nothing committed`,
        );
      }
      const commitStarted = this.ms();
      const committed = await this.server.commit(plan.state, runId, {
        lane: plan.lane,
        baseVersion: plan.baseVersion,
        terraformVersion: after.terraform_version,
        upserts: delta.upserts,
        deletes: delta.deletes,
        outputs: delta.outputs,
        counters: {
          add: plan.counts.create + plan.counts.replace,
          change: plan.counts.update,
          destroy: plan.counts.delete + plan.counts.replace + plan.counts.forget,
        },
      });
      return {
        status: 'committed',
        runId,
        lane: plan.lane,
        version: committed.version,
        serial: committed.serial,
        upserts: delta.upserts.length,
        deletes: delta.deletes.length,
        timings: { acquireMs, sliceMs, terraformMs, commitMs: this.ms() - commitStarted },
      };
    } catch (e) {
      const late = interrupted();
      if (late) return await late;
      return await ended('failed', message(e));
    } finally {
      heartbeat.stop();
      signal.removeEventListener('abort', onAbort);
      await workspace?.dispose();
    }
  }

  /** null once the reservations are held; otherwise the outcome that ends the run. */
  private async acquire(
    plan: KlPlan,
    runId: string,
    options: ApplyOptions,
    signal: AbortSignal,
    emit: (e: ApplyEvent) => void,
  ): Promise<ApplyOutcome | null> {
    const started = this.ms();
    const statusEvery = options.waitStatusEveryMs ?? 5_000;
    const poll = options.waitPollMs ?? 1_000;
    let lastStatus = -Infinity;
    for (;;) {
      if (signal.aborted) {
        return {
          status: 'aborted',
          runId: null,
          message: 'interrupted',
          outputState: null,
          keptOnServer: false,
        };
      }
      const outcome = await this.server.acquire(plan.state, {
        lane: plan.lane,
        runId,
        baseVersion: plan.baseVersion,
        write: plan.reservations.write,
        read: plan.reservations.read,
        writeSet: plan.writeSet,
        readSet: plan.readSet,
        leaseSeconds: options.leaseSeconds,
        info: {
          files: plan.files,
          targets: plan.targets,
          summary: plan.summary,
          ...(options.info ?? {}),
        },
      });
      if (outcome.status === 'acquired') {
        emit({
          type: 'acquired',
          runId,
          lane: plan.lane,
          reservations: outcome.reservations,
          expiresAt: outcome.expiresAt,
        });
        return null;
      }
      if (outcome.status === 'stale') return outcome;
      const waited = this.ms() - started;
      if (options.waitMs === null || waited >= options.waitMs) return outcome;
      if (this.ms() - lastStatus >= statusEvery) {
        emit({ type: 'waiting', holders: outcome.holders, waitedMs: waited });
        lastStatus = this.ms();
      }
      await sleep(Math.min(poll, options.waitMs - waited), signal);
    }
  }

  private heartbeat(
    state: string,
    runId: string,
    leaseSeconds: number,
    onLost: (e: DomainError) => void,
  ): { stop(): void } {
    let stopped = false;
    const every = Math.max(1_000, (leaseSeconds * 1000) / 3);
    const beat = async () => {
      if (stopped) return;
      try {
        await this.server.heartbeat(state, runId, leaseSeconds);
      } catch (e) {
        if (e instanceof DomainError && e.code === RESERVATION_EXPIRED) {
          stopped = true;
          onLost(e);
          return;
        }
        // A missed beat is retried; the lease covers a few.
      }
      if (!stopped) timer = setTimeout(() => void beat(), every);
    };
    let timer = setTimeout(() => void beat(), every);
    return {
      stop: () => {
        stopped = true;
        clearTimeout(timer);
      },
    };
  }
}

/** Where the re-plan's writes differ from the plan file's; null when they agree. */
export function writeSetDifference(
  planned: readonly { address: string; action: ChangeKind }[],
  replanned: readonly { address: string; kind: ChangeKind }[],
): string | null {
  const want = new Map(planned.map((c) => [c.address, c.action]));
  const got = new Map(replanned.map((c) => [c.address, c.kind]));
  const problems: string[] = [];
  for (const [address, kind] of got) {
    const expected = want.get(address);
    if (expected === undefined) problems.push(`${address} would ${kind}, not planned`);
    else if (expected !== kind) problems.push(`${address} would ${kind}, planned ${expected}`);
  }
  for (const [address, action] of want) {
    if (!got.has(address)) problems.push(`${address} planned to ${action}, now unchanged`);
  }
  if (problems.length === 0) return null;
  problems.sort();
  return problems.length > 3
    ? `${problems.slice(0, 3).join('; ')}; and ${problems.length - 3} more`
    : problems.join('; ');
}
