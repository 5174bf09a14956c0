import { DomainError } from '../shared/domain-error';

export type CtyErrorCode =
  | 'CTY.TYPE_MISMATCH'
  | 'CTY.UNSUPPORTED_ATTRIBUTE'
  | 'CTY.UNKNOWN_VALUE'
  | 'CTY.INVALID_TYPE'
  | 'CTY.MALFORMED_MSGPACK';

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
