import { DomainError } from '../../domain/shared/domain-error';
import { Diagnostic, renderDiagnostic } from '../../domain/cty/diagnostic';

export type ProviderErrorCode =
  | 'PROVIDER.NOT_FOUND'
  | 'PROVIDER.START_FAILED'
  | 'PROVIDER.CRASHED'
  | 'PROVIDER.TIMEOUT'
  | 'PROVIDER.RPC_FAILED'
  | 'PROVIDER.CLOSED'
  | 'PROVIDER.DIAGNOSTICS'
  | 'PROVIDER.INVALID_SOURCE'
  | 'PROVIDER.UNKNOWN_TYPE';

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
