import { DomainError } from '../domain/shared/domain-error';

/** kld stopped while a rebuild replayed the log: its copies were dropped, the live read models kept. */
export class RebuildStoppedError extends DomainError {
  constructor(cause: unknown) {
    super(
      'SERVER.UNAVAILABLE',
      'kld stopped before the rebuild of the read models finished; they are as they were: ' +
        'run the rebuild again',
      {},
      { cause },
    );
    this.name = 'RebuildStoppedError';
  }
}
