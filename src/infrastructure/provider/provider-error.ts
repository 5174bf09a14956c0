import { DomainError } from '../../domain/shared/domain-error';
import type { ErrorCode } from '../../domain/shared/error-codes';
import { Diagnostic, renderDiagnostic } from '../../domain/cty/diagnostic';

export type ProviderErrorCode = Extract<ErrorCode, `PROVIDER.${string}`>;

export class ProviderError extends DomainError {
  constructor(
    code: ProviderErrorCode,
    message: string,
    metadata: Record<string, unknown> = {},
    options?: { cause?: unknown },
  ) {
    super(code, message, metadata, options);
    this.name = 'ProviderError';
  }
}

/** The provider answered, but with error diagnostics. */
export class ProviderDiagnosticsError extends ProviderError {
  constructor(
    operation: string,
    public readonly diagnostics: Diagnostic[],
  ) {
    const errors = diagnostics.filter((d) => d.severity === 'error');
    super(
      'PROVIDER.DIAGNOSTICS',
      `${operation} failed: ${errors.map(renderDiagnostic).join('; ')}`,
      { operation, diagnostics },
    );
    this.name = 'ProviderDiagnosticsError';
  }
}
