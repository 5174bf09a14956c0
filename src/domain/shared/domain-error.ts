import type { ErrorCode } from './error-codes';

/**
 * The one error hierarchy. `code` is one of ERROR_CODES, stable and public
 * (clients match on it); the message is for humans. Transports map codes to
 * statuses in one place.
 */
export class DomainError extends Error {
  constructor(
    public readonly code: ErrorCode,
    message: string,
    public readonly metadata: Record<string, unknown> = {},
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'DomainError';
  }

  toJSON(): { code: ErrorCode; message: string } {
    return { code: this.code, message: this.message };
  }
}
