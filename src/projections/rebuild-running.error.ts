import { DomainError } from '../domain/shared/domain-error';

/** Another rebuild (this process, another replica, or `kld projections rebuild`) holds the lock. */
export class RebuildRunningError extends DomainError {
  constructor() {
    super(
      'PROJECTIONS.REBUILD_RUNNING',
      'a rebuild of the read models is already running; try again when it has finished',
    );
    this.name = 'RebuildRunningError';
  }
}
