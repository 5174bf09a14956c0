/**
 * The one error hierarchy. `code` is stable and public (clients match on it);
 * the message is for humans. Transports map codes to statuses in one place.
 */
export class DomainError extends Error {
  constructor(
    public readonly code: string,
    message: string,
    public readonly metadata: Record<string, unknown> = {},
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'DomainError';
  }

  toJSON(): { code: string; message: string } {
    return { code: this.code, message: this.message };
  }
}
