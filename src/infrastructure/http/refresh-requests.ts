import type { RefreshResult } from '../../domain/refresh';
import { parseStateDocument, StateDocumentV4 } from '../../domain/terraform';
import type { FinishRefreshRunDto, RefreshResultsDto } from './dto/refresh-run.dto';

/** The refresh API's snake_case bodies, checked by their DTOs, as the commands take them. */

export function refreshResultsOf(body: RefreshResultsDto): RefreshResult[] {
  return body.results.map((r) => ({
    address: r.address,
    provider: r.provider,
    outcome: r.outcome,
    beforeHash: r.before_hash,
    afterHash: r.after_hash,
    changedPaths: r.changed_paths ?? [],
    ...(r.error !== undefined ? { error: r.error } : {}),
  }));
}

/** The refreshed document, checked as terraform's POST checks one (STATE.INVALID). */
export function finishedDocumentOf(body: FinishRefreshRunDto): StateDocumentV4 | null {
  return body.document === undefined || body.document === null
    ? null
    : parseStateDocument(body.document);
}
