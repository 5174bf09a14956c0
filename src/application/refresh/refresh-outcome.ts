import type { RefreshResult } from '../../domain/refresh';
import { buildDocument, documentMeta, FlatInstance, StateDocumentV4 } from '../../domain/terraform';
import type { RefreshReport } from './refresh-report';
import type { RunContext } from './refresh-run-context';

/** The report's counts and address lists, from every outcome recorded in the run. */
export function summarise(
  ctx: RunContext,
): Omit<
  RefreshReport,
  'runId' | 'state' | 'status' | 'dryRun' | 'fromVersion' | 'toVersion' | 'durationMs' | 'warnings'
> {
  const results = [...ctx.outcomes.values()].map((o) => o.result);
  const of = (outcome: RefreshResult['outcome']) => results.filter((r) => r.outcome === outcome);
  const sortedAddresses = (rs: RefreshResult[]) => rs.map((r) => r.address).sort();
  const drifted = sortedAddresses(of('drifted'));
  const normalized = sortedAddresses(of('normalized'));
  const gone = sortedAddresses(of('gone'));
  const skippedCount = of('skipped').length;
  const failures = of('failed')
    .map((r) => ({ address: r.address, message: r.error ?? 'failed' }))
    .sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0));
  return {
    checked: results.length - skippedCount,
    changed: drifted.length,
    normalized: normalized.length,
    gone: gone.length,
    failed: failures.length,
    skipped: skippedCount,
    drifted,
    normalizedAddresses: normalized,
    goneAddresses: gone,
    failures,
  };
}

/** Same lineage, next serial; gone objects dropped, as terraform's refresh does. */
export function refreshedDocument(
  doc: StateDocumentV4,
  flat: FlatInstance[],
  ctx: RunContext,
): StateDocumentV4 {
  const meta = documentMeta(doc);
  const placed: Pick<FlatInstance, 'resource' | 'instance'>[] = [];
  for (const f of flat) {
    const outcome = ctx.outcomes.get(f);
    if (!outcome) placed.push(f);
    else if (outcome.instance) placed.push({ resource: f.resource, instance: outcome.instance });
  }
  return buildDocument({ ...meta, serial: meta.serial + 1 }, placed);
}
