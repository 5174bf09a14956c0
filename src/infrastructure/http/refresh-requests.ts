import {
  REFRESH_OUTCOMES,
  REFRESH_RUN_STATUSES,
  RefreshOutcome,
  RefreshResult,
  RefreshRunStatus,
} from '../../domain/refresh';
import { DomainError } from '../../domain/shared/domain-error';
import {
  isJsonObject,
  JsonLimitError,
  JsonObject,
  parseJsonLossless,
  parseStateDocument,
  StateDocumentV4,
} from '../../domain/terraform';
import { keyProblem, textProblem } from '../../domain/shared/storable-text';
import { checkActor } from './caller';
import { limitError, utf8Text } from './read-body';
import { stateNameFrom } from './state-name';

/** The JSON bodies of the refresh API (snake_case, as documented), checked member by member. */

const invalid = (message: string) => new DomainError('REQUEST.INVALID', message);

export function jsonBody(body: Buffer): JsonObject {
  let value: unknown;
  try {
    // Lossless: a finish carries a state document, whose numbers may exceed a double.
    value = parseJsonLossless(utf8Text(body, 'REQUEST.INVALID', 'request body'));
  } catch (err) {
    if (err instanceof JsonLimitError) throw limitError('REQUEST.INVALID', 'request body', err);
    throw invalid(`request body is not valid JSON: ${(err as Error).message}`);
  }
  if (!isJsonObject(value)) throw invalid('request body must be a JSON object');
  return value;
}

function str(o: JsonObject, key: string, at = key): string {
  const v = o[key];
  if (typeof v !== 'string' || v === '') throw invalid(`${at} must be a non-empty string`);
  return v;
}

/** An optional string ('' counts as absent) that is looked up and stored as text. */
function storableOrNull(value: string | undefined, at: string): string | null {
  return value ? storable(value, at) : null;
}

/** A string that lands in a text column (`index`: one that keys an index). */
function storable(value: string, at: string, index = false): string {
  const problem = index ? keyProblem(value) : textProblem(value);
  if (problem !== null) throw invalid(`${at} ${problem}`);
  return value;
}

function optStr(o: JsonObject, key: string, at = key): string | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw invalid(`${at} must be a string`);
  return v;
}

function oneOf<T extends string>(o: JsonObject, key: string, values: readonly T[], at = key): T {
  const v = o[key];
  if (typeof v !== 'string' || !values.includes(v as T)) {
    throw invalid(`${at} must be one of ${values.join(', ')}`);
  }
  return v as T;
}

export interface StartRunRequest {
  state: string;
  dryRun: boolean;
  actor?: string;
  lockId?: string;
}

export function parseStartRun(o: JsonObject): StartRunRequest {
  const dryRun = o.dry_run ?? false;
  if (typeof dryRun !== 'boolean') throw invalid('dry_run must be a boolean');
  const actor = optStr(o, 'actor');
  if (actor !== undefined && (actor === '' || actor.length > 200)) {
    throw invalid('actor must be 1 to 200 characters');
  }
  if (actor !== undefined) checkActor(actor, 'actor');
  return { state: stateNameFrom(str(o, 'state')), dryRun, actor, lockId: optStr(o, 'lock_id') };
}

export function parseResults(o: JsonObject): RefreshResult[] {
  if (!Array.isArray(o.results)) throw invalid('results must be an array');
  return o.results.map((r, i): RefreshResult => {
    const at = `results[${i}]`;
    if (!isJsonObject(r)) throw invalid(`${at} must be an object`);
    const outcome: RefreshOutcome = oneOf(r, 'outcome', REFRESH_OUTCOMES, `${at}.outcome`);
    const after = r.after_hash;
    if (after !== null && typeof after !== 'string') {
      throw invalid(`${at}.after_hash must be a string or null`);
    }
    const paths = r.changed_paths ?? [];
    if (!Array.isArray(paths) || !paths.every((p) => typeof p === 'string')) {
      throw invalid(`${at}.changed_paths must be an array of strings`);
    }
    // `error` and `changed_paths` are kept exactly (NUL-safe where projected).
    const error = optStr(r, 'error', `${at}.error`);
    return {
      address: storable(str(r, 'address', `${at}.address`), `${at}.address`, true),
      provider: storable(str(r, 'provider', `${at}.provider`), `${at}.provider`),
      outcome,
      beforeHash: storable(str(r, 'before_hash', `${at}.before_hash`), `${at}.before_hash`),
      afterHash: after === null ? null : storable(after, `${at}.after_hash`),
      changedPaths: paths as string[],
      ...(error !== undefined ? { error } : {}),
    };
  });
}

export interface FinishRunRequest {
  status: RefreshRunStatus;
  errorSummary: string | null;
  document: StateDocumentV4 | null;
  lockId: string | null;
}

export function parseFinish(o: JsonObject): FinishRunRequest {
  const status = oneOf(o, 'status', REFRESH_RUN_STATUSES);
  const document =
    o.document === undefined || o.document === null ? null : parseStateDocument(o.document);
  return {
    status,
    errorSummary: optStr(o, 'error_summary') ?? null,
    document,
    lockId: optStr(o, 'lock_id') || null,
  };
}

export interface ProviderConfigRequest {
  state: string;
  source: string;
  alias: string | null;
  config: JsonObject;
  checkSchema: boolean;
}

export function parseProviderConfig(o: JsonObject): ProviderConfigRequest {
  if (!isJsonObject(o.config)) throw invalid('config must be a JSON object');
  const skip = o.skip_schema_check ?? false;
  if (typeof skip !== 'boolean') throw invalid('skip_schema_check must be a boolean');
  return {
    state: stateNameFrom(str(o, 'state')),
    source: str(o, 'source'),
    alias: storableOrNull(optStr(o, 'alias'), 'alias'),
    config: o.config,
    checkSchema: !skip,
  };
}
