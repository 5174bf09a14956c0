import { DomainError } from '../domain/shared/domain-error';
import type { ErrorCode } from '../domain/shared/error-codes';

/**
 * A failure `kl` finds itself (the server's own arrive as DomainErrors with
 * its code). Reported like every failure: one line on stderr
 * (`kl: <message>`) and exit code 1.
 */
export class KlError extends DomainError {
  constructor(code: ErrorCode, message: string) {
    super(code, message);
    this.name = 'KlError';
  }
}
