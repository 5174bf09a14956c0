import { AttributePath, renderPath } from './attribute-path';

/** A provider diagnostic, protocol-neutral. */
export interface Diagnostic {
  severity: 'error' | 'warning';
  summary: string;
  detail: string;
  attribute?: AttributePath;
}

export function hasErrors(diagnostics: readonly Diagnostic[]): boolean {
  return diagnostics.some((d) => d.severity === 'error');
}

/** One line per diagnostic: `Error: <summary>: <detail> (at <path>)`. */
export function renderDiagnostic(d: Diagnostic): string {
  const head = `${d.severity === 'error' ? 'Error' : 'Warning'}: ${d.summary}`;
  const detail = d.detail ? `: ${d.detail}` : '';
  const where = d.attribute && d.attribute.length > 0 ? ` (at ${renderPath(d.attribute)})` : '';
  return head + detail + where;
}
