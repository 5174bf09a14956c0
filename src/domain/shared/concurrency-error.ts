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
