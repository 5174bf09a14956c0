import { DomainError } from '../../domain/shared/domain-error';
import type { ErrorCode } from '../../domain/shared/error-codes';

export type RefreshErrorCode =
  | Extract<ErrorCode, `REFRESH.${string}`>
  | 'PROVIDER_CONFIG.INVALID'
  // Another holder's lock: the same refusal as a terraform LOCK's.
  | 'STATE.LOCKED';

/** A run-level failure: the whole refresh stops and nothing is committed. */
export class RefreshError extends DomainError {
  constructor(code: RefreshErrorCode, message: string, metadata: Record<string, unknown> = {}) {
    super(code, message, metadata);
    this.name = 'RefreshError';
  }
}
