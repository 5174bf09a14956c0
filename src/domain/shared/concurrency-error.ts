import { DomainError } from './domain-error';

/** The stream was not at the revision the writer expected. */
export class WrongExpectedRevisionError extends DomainError {
  constructor(streamId: string, expected: string, actual: string) {
    super(
      'EVENTS.WRONG_EXPECTED_REVISION',
      `stream ${streamId}: expected revision ${expected}, found ${actual}`,
      { streamId, expected, actual },
    );
    this.name = 'WrongExpectedRevisionError';
  }
}

/**
 * An event id the writer gave is already stored as a different event (or as
 * part of a different append). Ids are the writer's promise of identity, so
 * this is a bug or a forged retry, never something to overwrite.
 */
export class EventIdConflictError extends DomainError {
  constructor(streamId: string, eventId: string, reason: string) {
    super(
      'EVENTS.EVENT_ID_CONFLICT',
      `stream ${streamId}: event ${eventId} is already stored ${reason}`,
      { streamId, eventId },
    );
    this.name = 'EventIdConflictError';
  }
}
