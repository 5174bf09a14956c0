import { DomainError } from '../../domain/shared/domain-error';

export const PROJECTION_ADMIN = Symbol('ProjectionAdmin');

/** A projector stopped at an event it cannot apply: what `/readyz` reports. */
export interface ProjectionHalt {
  projector: string;
  /** The event's global position (`event_log.position`). */
  position: number;
  transactionId: string;
  stream: string;
  type: string;
  /** The error, first line only: never the event's data. */
  reason: string;
  since: string;
}

export class ProjectionHaltedError extends DomainError {
  constructor(readonly halt: ProjectionHalt) {
    super(
      'PROJECTIONS.CANNOT_APPLY',
      `projector ${halt.projector} cannot apply event ${halt.position} ` +
        `(${halt.type} on stream ${halt.stream}): ${halt.reason}`,
      { projector: halt.projector, position: halt.position },
    );
    this.name = 'ProjectionHaltedError';
  }
}

/** What operators (readiness, rebuild, skip) ask of the projections. */
export interface ProjectionAdmin {
  /** Projectors stopped at an event they cannot apply. */
  halted(): ProjectionHalt[];
  /** True when no projector has committed events left to apply. */
  caughtUp(): Promise<boolean>;
  /**
   * Replays the whole log into fresh read models and swaps them in; throws
   * ProjectionHaltedError for an event a projector cannot apply, and
   * PROJECTIONS.REBUILD_RUNNING while another rebuild runs.
   */
  rebuild(): Promise<{ projector: string; events: number }[]>;
  /** Lets a projector pass over the event at `position` from now on. */
  skip(
    projector: string,
    position: bigint,
    reason: string,
  ): Promise<{ projector: string; position: number; stream: string; type: string }>;
}
