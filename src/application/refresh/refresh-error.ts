import { DomainError } from '../../domain/shared/domain-error';

export type RefreshErrorCode =
  | 'REFRESH.LOCKED'
  | 'REFRESH.CONFIG_ENV_MISSING'
  | 'REFRESH.CONFIG_ENV_REFUSED'
  | 'REFRESH.CONFIG_INVALID'
  | 'REFRESH.STATE_CHANGED'
  | 'REFRESH.STATE_EMPTY';

/** A run-level failure: the whole refresh stops and nothing is committed. */
export class RefreshError extends DomainError {
  constructor(code: RefreshErrorCode, message: string, metadata: Record<string, unknown> = {}) {
    super(code, message, metadata);
    this.name = 'RefreshError';
  }
}
