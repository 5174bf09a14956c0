import { randomUUID } from 'node:crypto';
import {
  AbortApplyRunHandler,
  CommitApplyRunHandler,
  FinishApplyRunHandler,
  RenewApplyRunHandler,
  StartApplyRunHandler,
} from '../../src/application/apply-runs/apply-run-command.handlers';
import {
  AbortApplyRunCommand,
  CommitApplyRunCommand,
  CommitApplyRunRequest,
  FinishApplyRunCommand,
  RenewApplyRunCommand,
  StartApplyRunCommand,
  StartApplyRunRequest,
} from '../../src/application/apply-runs/apply-run-commands';
import { DeciderService } from '../../src/application/decider.service';
import type { ApplyStatus } from '../../src/domain/apply';
import type { JsonValue } from '../../src/domain/terraform';
import { PostgresSnapshotStore } from '../../src/infrastructure/event-store/postgres-snapshot-store';
import { ApplyReadModel } from '../../src/infrastructure/read-models/apply-read-model';
import type { StateHarness } from './state-harness';

/**
 * The apply-run use cases (the handlers kld runs) over a StateHarness's
 * event store, projections and clock.
 */
export class ApplyHarness {
  readonly readModel: ApplyReadModel;
  private readonly startHandler: StartApplyRunHandler;
  private readonly renewHandler: RenewApplyRunHandler;
  private readonly commitHandler: CommitApplyRunHandler;
  private readonly finishHandler: FinishApplyRunHandler;
  private readonly abortHandler: AbortApplyRunHandler;

  constructor(private readonly h: StateHarness) {
    const ids = { uuid: randomUUID };
    const snapshots = new PostgresSnapshotStore(h.db);
    const deciders = new DeciderService({
      events: h.events,
      snapshots,
      sync: h.runner,
      clock: h.clockPort,
      ids,
    });
    this.readModel = new ApplyReadModel(h.db);
    this.startHandler = new StartApplyRunHandler(deciders);
    this.renewHandler = new RenewApplyRunHandler(deciders);
    this.commitHandler = new CommitApplyRunHandler(deciders);
    this.finishHandler = new FinishApplyRunHandler(deciders);
    this.abortHandler = new AbortApplyRunHandler(deciders, this.readModel);
  }

  private caller(actor: string) {
    this.h.advance(1);
    return { actor, correlationId: `corr-${randomUUID()}` };
  }

  start(state: string, request: Partial<StartApplyRunRequest>, actor = 'alice') {
    return this.startHandler.execute(
      new StartApplyRunCommand({
        name: state,
        baseVersion: 1,
        reservations: [],
        leaseSeconds: 900,
        writeSet: [],
        readSet: [],
        info: {},
        lane: 'full',
        ...request,
        caller: this.caller(actor),
      }),
    );
  }

  heartbeat(state: string, runId: string, leaseSeconds = 900) {
    return this.renewHandler.execute(
      new RenewApplyRunCommand({ name: state, runId, leaseSeconds, caller: this.caller('alice') }),
    );
  }

  commit(state: string, runId: string, change: Partial<CommitApplyRunRequest>, actor = 'alice') {
    return this.commitHandler.execute(
      new CommitApplyRunCommand({
        name: state,
        runId,
        baseVersion: 1,
        terraformVersion: '1.11.4',
        upserts: [],
        deletes: [],
        outputs: { set: {}, remove: [] },
        counters: null,
        checksum: `commit-${runId}`,
        ...change,
        caller: this.caller(actor),
      }),
    );
  }

  finish(
    state: string,
    runId: string,
    status: Exclude<ApplyStatus, 'committed'>,
    errorSummary: string | null = null,
    outputState: JsonValue | null = null,
  ) {
    return this.finishHandler.execute(
      new FinishApplyRunCommand({
        name: state,
        runId,
        status,
        errorSummary,
        outputState,
        caller: this.caller('alice'),
      }),
    );
  }

  abort(state: string | null, runId: string, actor = 'operator') {
    return this.abortHandler.execute(
      new AbortApplyRunCommand({ name: state, runId, caller: this.caller(actor) }),
    );
  }
}
