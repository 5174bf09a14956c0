import { Inject } from '@nestjs/common';
import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { ApplyRun, applyNotFound, APPLY_FINISHED, applyStreamId } from '../../domain/apply';
import { DomainError } from '../../domain/shared/domain-error';
import {
  ActiveState,
  APPLY_ALREADY_STARTED,
  indexInPieces,
  readGlobsAhead,
  reservationsOf,
  StateAggregate,
  stateStreamId,
} from '../../domain/state';
import { DeciderService } from '../decider.service';
import { piecesInTurns, rangesInTurns } from '../in-turns';
import { withQuota } from '../quota/quota-commands';
import { STATE } from '../state/state-aggregate';
import { APPLY_RUN } from './apply-run-aggregate';
import {
  AbortApplyRunCommand,
  AbortedApplyRun,
  CommitApplyRunCommand,
  FinishApplyRunCommand,
  RenewApplyRunCommand,
  StartApplyRunCommand,
  StartedApplyRun,
} from './apply-run-commands';
import { APPLY_RUN_LOOKUP, ApplyRunLookup } from './apply-run-read.port';

/** Reservations indexed per turn of the event loop before a run's start is decided. */
const GLOBS_PER_TURN = 1000;

function runOf(deciders: DeciderService, runId: string): Promise<ApplyRun> {
  return deciders.state(APPLY_RUN, applyStreamId(runId));
}

function asActive(state: StateAggregate): ActiveState {
  if (state.status !== 'active') throw new Error('the state is gone after a command on it');
  return state;
}

/** The run, which must have started on this state. */
function onState(
  run: ApplyRun,
  runId: string,
  stateName: string,
): ApplyRun & { status: 'running' | 'finished' } {
  if (run.status === 'missing' || run.started.stateName !== stateName) {
    throw applyNotFound(`${runId} on state ${stateName}`);
  }
  return run;
}

function ended(run: ApplyRun & { status: 'finished' }, runId: string): DomainError {
  return new DomainError(
    APPLY_FINISHED,
    `apply run ${runId} already ended: ${run.outcome}` +
      (run.version === null ? '' : ` as version ${run.version}`),
    { status: run.outcome },
  );
}

@CommandHandler(StartApplyRunCommand)
export class StartApplyRunHandler implements ICommandHandler<StartApplyRunCommand> {
  constructor(private readonly deciders: DeciderService) {}

  async execute(c: StartApplyRunCommand): Promise<StartedApplyRun> {
    const runId = c.runId ?? this.deciders.newId();
    const before = await runOf(this.deciders, runId);
    if (before.status === 'finished') throw ended(before, runId);
    if (before.status === 'running' && before.started.stateName !== c.name) {
      throw new DomainError(
        APPLY_ALREADY_STARTED,
        `apply run ${runId} already runs on state ${before.started.stateName}`,
      );
    }
    const metadata = this.deciders.context(c.caller);
    const reservationIds = c.reservations.map(() => this.deciders.newId());
    // Most of deciding a run of many globs is reading them: done here, a
    // piece per turn, so the decision (one turn, on the stream) looks them up.
    await rangesInTurns(c.reservations.length, (from, to) =>
      readGlobsAhead(c.reservations, from, to),
    );
    // And so is indexing what others hold, after a run of many globs started.
    const warm = this.deciders.warmState(STATE, stateStreamId(c.name));
    if (warm?.state.status === 'active') {
      await piecesInTurns(indexInPieces(warm.state, GLOBS_PER_TURN));
    }
    const { state } = await withQuota(this.deciders, c.name, (quota, readFrom) =>
      this.deciders.execute(
        STATE,
        {
          type: 'AcquireReservations',
          data: {
            name: c.name,
            runId,
            reservationIds,
            requests: c.reservations,
            leaseSeconds: c.leaseSeconds,
            info: c.info,
            baseVersion: c.baseVersion,
            writeSet: c.writeSet,
            readSet: c.readSet,
            ...quota,
          },
          metadata,
        },
        readFrom,
      ),
    );
    const active = asActive(state);
    const held = reservationsOf(active, runId);
    const expiresAt = held[0].expiresAt;
    await this.deciders.execute(APPLY_RUN, {
      type: 'StartApply',
      data: {
        runId,
        stateId: active.stateId,
        stateName: c.name,
        lane: c.lane,
        baseVersion: c.baseVersion,
        writeSet: c.writeSet,
        readSet: c.readSet,
        reservations: held.map((h) => ({ id: h.id, glob: h.glob, mode: h.mode })),
        expiresAt,
        info: c.info,
      },
      metadata,
    });
    return {
      runId,
      state: c.name,
      reservations: held.map((h) => ({
        id: h.id,
        glob: h.glob,
        mode: h.mode,
        expiresAt: h.expiresAt,
      })),
      expiresAt,
    };
  }
}

@CommandHandler(RenewApplyRunCommand)
export class RenewApplyRunHandler implements ICommandHandler<RenewApplyRunCommand> {
  constructor(private readonly deciders: DeciderService) {}

  async execute(c: RenewApplyRunCommand): Promise<{ expiresAt: string }> {
    const run = onState(await runOf(this.deciders, c.runId), c.runId, c.name);
    if (run.status === 'finished') throw ended(run, c.runId);
    const { events } = await this.deciders.execute(STATE, {
      type: 'RenewReservations',
      data: { name: c.name, runId: c.runId, leaseSeconds: c.leaseSeconds },
      metadata: this.deciders.context(c.caller),
    });
    const renewed = events.find((e) => e.type === 'ReservationRenewed');
    if (renewed?.type !== 'ReservationRenewed') throw new Error('a renewal that renewed nothing');
    return { expiresAt: renewed.data.expiresAt };
  }
}

@CommandHandler(CommitApplyRunCommand)
export class CommitApplyRunHandler implements ICommandHandler<CommitApplyRunCommand> {
  constructor(private readonly deciders: DeciderService) {}

  async execute(c: CommitApplyRunCommand): Promise<{ version: number; serial: number }> {
    const run = onState(await runOf(this.deciders, c.runId), c.runId, c.name);
    if (run.status === 'finished') {
      // A retry of a commit whose answer was lost: answer it again. Another commit on the
      // finished run is refused, not answered as if stored (runs finished before the checksum
      // was recorded cannot tell: they answer again, as they did).
      if (
        run.outcome === 'committed' &&
        run.version !== null &&
        run.serial !== null &&
        (run.checksum === null || run.checksum === c.checksum)
      ) {
        return { version: run.version, serial: run.serial };
      }
      throw ended(run, c.runId);
    }
    const metadata = this.deciders.context(c.caller);
    const { events, state } = await withQuota(this.deciders, c.name, (quota, readFrom) =>
      this.deciders.execute(
        STATE,
        {
          type: 'CommitDelta',
          data: {
            name: c.name,
            // One commit path for both lanes; the version says which one wrote it.
            source: run.started.lane === 'state-engine' ? 'state-engine' : 'apply',
            runId: c.runId,
            baseVersion: c.baseVersion,
            checksum: c.checksum,
            terraformVersion: c.terraformVersion,
            upserts: c.upserts,
            deletes: c.deletes,
            outputs: c.outputs,
            release: true,
            ...quota,
          },
          metadata,
        },
        readFrom,
      ),
    );
    const applied = events.find((e) => e.type === 'ApplyCommitted');
    // Nothing appended: this very commit was stored before (a retry), and is the head.
    const active = asActive(state);
    const version = applied?.type === 'ApplyCommitted' ? applied.data.version : active.version;
    const serial = applied?.type === 'ApplyCommitted' ? applied.data.serial : (active.serial ?? 0);
    await this.deciders.execute(APPLY_RUN, {
      type: 'FinishApply',
      data: {
        runId: c.runId,
        status: 'committed',
        version,
        serial,
        counters: c.counters,
        errorSummary: null,
        outputState: null,
        checksum: c.checksum,
      },
      metadata,
    });
    return { version, serial };
  }
}

@CommandHandler(FinishApplyRunCommand)
export class FinishApplyRunHandler implements ICommandHandler<FinishApplyRunCommand> {
  constructor(private readonly deciders: DeciderService) {}

  async execute(c: FinishApplyRunCommand): Promise<void> {
    const run = onState(await runOf(this.deciders, c.runId), c.runId, c.name);
    if (run.status === 'finished') {
      if (run.outcome === c.status) return; // a retry
      throw ended(run, c.runId);
    }
    const metadata = this.deciders.context(c.caller);
    await this.deciders.execute(STATE, {
      type: 'ReleaseReservations',
      data: { name: c.name, runId: c.runId, reason: c.status },
      metadata,
    });
    await this.deciders.execute(APPLY_RUN, {
      type: 'FinishApply',
      data: {
        runId: c.runId,
        status: c.status,
        version: null,
        serial: null,
        counters: null,
        errorSummary: c.errorSummary,
        outputState: c.outputState,
      },
      metadata,
    });
  }
}

@CommandHandler(AbortApplyRunCommand)
export class AbortApplyRunHandler implements ICommandHandler<AbortApplyRunCommand> {
  constructor(
    private readonly deciders: DeciderService,
    @Inject(APPLY_RUN_LOOKUP) private readonly lookup: ApplyRunLookup,
  ) {}

  async execute(c: AbortApplyRunCommand): Promise<AbortedApplyRun> {
    const run = await runOf(this.deciders, c.runId);
    const stateName =
      c.name ??
      (run.status !== 'missing' ? run.started.stateName : await this.lookup.stateOfRun(c.runId));
    if (stateName === null) throw applyNotFound(c.runId);
    if (run.status !== 'missing' && run.started.stateName !== stateName) {
      throw applyNotFound(`${c.runId} on state ${stateName}`);
    }
    c.mayWrite?.(stateName);
    const metadata = this.deciders.context(c.caller);
    // A run whose reservations were granted but whose start was never
    // recorded (its client died in between) still has reservations to free.
    const { events } = await this.deciders.execute(STATE, {
      type: 'ReleaseReservations',
      data: { name: stateName, runId: c.runId, reason: 'aborted' },
      metadata,
    });
    const released = events.reduce(
      (n, e) => n + (e.type === 'ReservationReleased' ? e.data.reservationIds.length : 0),
      0,
    );
    if (run.status === 'missing') {
      if (released === 0) throw applyNotFound(`${c.runId} on state ${stateName}`);
      return { runId: c.runId, state: stateName, status: null, released };
    }
    if (run.status === 'finished') {
      return { runId: c.runId, state: stateName, status: run.outcome, released };
    }
    await this.deciders.execute(APPLY_RUN, {
      type: 'FinishApply',
      data: {
        runId: c.runId,
        status: 'aborted',
        version: null,
        serial: null,
        counters: null,
        errorSummary: `aborted by ${c.caller.actor}`,
        outputState: null,
      },
      metadata,
    });
    return { runId: c.runId, state: stateName, status: 'aborted', released };
  }
}

export const APPLY_RUN_COMMAND_HANDLERS = [
  StartApplyRunHandler,
  RenewApplyRunHandler,
  CommitApplyRunHandler,
  FinishApplyRunHandler,
  AbortApplyRunHandler,
];
