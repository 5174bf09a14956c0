import { DomainError } from '../shared/domain-error';
import type { ErrorCode } from '../shared/error-codes';

export type CtyErrorCode = Extract<ErrorCode, `CTY.${string}`>;

/** A value or type that does not fit its schema; `path` is rendered like `tags["env"]`. */
export class CtyError extends DomainError {
  constructor(
    code: CtyErrorCode,
    message: string,
    public readonly path: string = '',
  ) {
    super(code, path ? `${path}: ${message}` : message, { path });
    this.name = 'CtyError';
  }
}
