import { ReservationMode } from '../reservations/address-glob';
import { DomainEvent } from '../shared/event';
import { JsonObject, JsonValue } from '../terraform/json-value';

/** Event type names are part of the public log format: written literally, never derived. */
export const ApplyEventType = {
  ApplyStarted: 'ApplyStarted',
  ApplyFinished: 'ApplyFinished',
} as const;

export const APPLY_EVENT_TYPES: readonly string[] = Object.values(ApplyEventType);

/**
 * `full`: kl apply plans and applies against the whole trunk (issue 11);
 * `state-engine`: the sliced lane of ADR 0029.
 */
export type ApplyLane = 'full' | 'state-engine';
export const APPLY_LANES: readonly ApplyLane[] = ['full', 'state-engine'];

export type ApplyStatus = 'committed' | 'failed' | 'aborted' | 'conflict';
export const APPLY_STATUSES: readonly ApplyStatus[] = [
  'committed',
  'failed',
  'aborted',
  'conflict',
];
/** What a run may be finished with other than by its commit. */
export const UNCOMMITTED_STATUSES: readonly ApplyStatus[] = ['failed', 'aborted', 'conflict'];

export interface ApplyCounters {
  add: number;
  change: number;
  destroy: number;
}

export interface ReservedGlob {
  id: string;
  glob: string;
  mode: ReservationMode;
}

export type ApplyStarted = DomainEvent<
  'ApplyStarted',
  {
    runId: string;
    stateId: string;
    stateName: string;
    lane: ApplyLane;
    baseVersion: number;
    writeSet: string[];
    readSet: string[];
    reservations: ReservedGlob[];
    expiresAt: string;
    info: JsonObject;
  }
>;

/**
 * `version`/`serial`: what a committed run wrote. `outputState`: the state
 * document terraform left behind when the run did not commit (terraform may
 * have changed real infrastructure: that document is the only record of it).
 */
export type ApplyFinished = DomainEvent<
  'ApplyFinished',
  {
    runId: string;
    stateId: string;
    status: ApplyStatus;
    version: number | null;
    serial: number | null;
    counters: ApplyCounters | null;
    errorSummary: string | null;
    outputState: JsonValue | null;
    /**
     * The commit's checksum (status committed): a commit sent again on the
     * finished run is answered again only if it is that same commit. Absent
     * in events written before wave 26.
     */
    checksum?: string;
  }
>;

export type ApplyEvent = ApplyStarted | ApplyFinished;

export function isApplyEvent(event: DomainEvent): event is ApplyEvent {
  return APPLY_EVENT_TYPES.includes(event.type);
}
