import type {
  CommitApplyRunRequest,
  StartApplyRunRequest,
  StartedApplyRun,
} from '../../application/apply-runs/apply-run-commands';
import {
  APPLY_LANES,
  ApplyCounters,
  ApplyLane,
  ApplyStatus,
  UNCOMMITTED_STATUSES,
} from '../../domain/apply';
import { DomainError } from '../../domain/shared/domain-error';
import { limitError, utf8Text } from './read-body';
import { keyProblem, textProblem } from '../../domain/shared/storable-text';
import { DEFAULT_LEASE_SECONDS, DeltaUpsert } from '../../domain/state';
import {
  isJsonObject,
  JsonLimitError,
  JsonObject,
  JsonValue,
  OutputV4,
  parseJsonLossless,
  parseStateDocument,
  resourceDescriptor,
  ResourceV4,
  StateDocumentV4,
} from '../../domain/terraform';

/** The JSON bodies of the apply-run API (snake_case, docs/api.md), checked member by member. */

const invalid = (message: string) => new DomainError('REQUEST.INVALID', message);

/**
 * A request body as a JSON object, parsed losslessly: a commit and a finish
 * carry instances and documents whose numbers may exceed a double.
 */
export function jsonBody(body: Buffer): JsonObject {
  let value: unknown;
  try {
    value = parseJsonLossless(utf8Text(body, 'REQUEST.INVALID', 'request body'));
  } catch (err) {
    if (err instanceof JsonLimitError) throw limitError('REQUEST.INVALID', 'request body', err);
    throw invalid(`request body is not valid JSON: ${(err as Error).message}`);
  }
  if (!isJsonObject(value)) throw invalid('request body must be a JSON object');
  return value;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A run id: a uuid, in lower case (its one spelling). */
export function runIdFrom(value: unknown, at = 'run id'): string {
  if (typeof value !== 'string' || !UUID.test(value)) throw invalid(`${at} must be a uuid`);
  return value.toLowerCase();
}

function only(o: JsonObject, keys: readonly string[], what: string): void {
  const unknown = Object.keys(o).filter((k) => !keys.includes(k));
  if (unknown.length > 0) {
    throw invalid(
      `${what} has unknown member ${JSON.stringify(unknown[0])} (known: ${keys.join(', ')})`,
    );
  }
}

/**
 * An integer from `min` to `max`; the refusal says which bound a number
 * broke (a lease's range is the domain's to state, so it passes any integer).
 */
function integer(o: JsonObject, key: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const v = o[key];
  if (typeof v !== 'number' || !Number.isInteger(v)) {
    throw invalid(`${key} must be an integer, got ${JSON.stringify(v) ?? 'nothing'}`);
  }
  if (v < min || v > max) {
    throw invalid(`${key} must be from ${min} to ${max}, got ${v}`);
  }
  return v;
}

/** An array of strings that key indexes (globs, addresses, names). */
function keys(o: JsonObject, key: string, required = true): string[] {
  const v = o[key];
  if (v === undefined && !required) return [];
  if (!Array.isArray(v)) throw invalid(`${key} must be an array of strings`);
  return v.map((item, i) => {
    if (typeof item !== 'string' || item === '') {
      throw invalid(`${key}[${i}] must be a non-empty string`);
    }
    const problem = keyProblem(item);
    if (problem !== null) throw invalid(`${key}[${i}] ${problem}`);
    return item;
  });
}

function object(o: JsonObject, key: string): JsonObject | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (!isJsonObject(v)) throw invalid(`${key} must be an object`);
  return v;
}

const START_KEYS = [
  'run_id',
  'base_version',
  'write',
  'read',
  'lease_seconds',
  'write_set',
  'read_set',
  'info',
  'lane',
] as const;

export function parseStartApplyRun(o: JsonObject): StartApplyRunRequest {
  only(o, START_KEYS, 'an apply run');
  const write = keys(o, 'write', false);
  const read = keys(o, 'read', false);
  if (write.length + read.length === 0) {
    throw invalid('an apply run reserves something: give write and/or read globs');
  }
  const lane = o.lane ?? 'full';
  if (typeof lane !== 'string' || !APPLY_LANES.includes(lane as ApplyLane)) {
    throw invalid(`lane must be one of ${APPLY_LANES.join(', ')}`);
  }
  return {
    ...(o.run_id === undefined ? {} : { runId: runIdFrom(o.run_id, 'run_id') }),
    baseVersion: integer(o, 'base_version', 1),
    reservations: [
      ...write.map((glob) => ({ glob, mode: 'write' as const })),
      ...read.map((glob) => ({ glob, mode: 'read' as const })),
    ],
    leaseSeconds:
      o.lease_seconds === undefined
        ? DEFAULT_LEASE_SECONDS
        : integer(o, 'lease_seconds', -Infinity, Infinity),
    writeSet: keys(o, 'write_set', false),
    readSet: keys(o, 'read_set', false),
    info: object(o, 'info') ?? {},
    lane: lane as ApplyLane,
  };
}

/** `{}` or `{"lease_seconds": N}`; an empty body is `{}`. */
export function parseHeartbeat(o: JsonObject): number {
  only(o, ['lease_seconds'], 'a heartbeat');
  return o.lease_seconds === undefined
    ? DEFAULT_LEASE_SECONDS
    : integer(o, 'lease_seconds', -Infinity, Infinity);
}

const COMMIT_KEYS = [
  'base_version',
  'terraform_version',
  'upserts',
  'deletes',
  'outputs',
  'counters',
] as const;
const RESOURCE_KEYS = ['module', 'mode', 'type', 'name', 'provider', 'each'];

function counters(o: JsonObject): ApplyCounters | null {
  const c = object(o, 'counters');
  if (c === undefined) return null;
  only(c, ['add', 'change', 'destroy'], 'counters');
  const n = (key: string) => {
    const v = c[key] ?? 0;
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0 || v > 2_147_483_647) {
      throw invalid(`counters.${key} must be a non-negative integer`);
    }
    return v;
  };
  return { add: n('add'), change: n('change'), destroy: n('destroy') };
}

/**
 * The row-level change of a commit. Its instances and outputs are checked
 * exactly as a posted document's are (parseStateDocument), by putting them
 * into one: the body was parsed losslessly, so numbers beyond double
 * precision stay exact.
 */
export function parseCommit(o: JsonObject, checksum: string): CommitApplyRunRequest {
  only(o, COMMIT_KEYS, 'a commit');
  const terraformVersion = o.terraform_version;
  if (typeof terraformVersion !== 'string' || terraformVersion === '') {
    throw invalid('terraform_version must be a non-empty string');
  }
  const upserts = o.upserts ?? [];
  if (!Array.isArray(upserts)) throw invalid('upserts must be an array');
  const addresses: string[] = [];
  const resources: ResourceV4[] = upserts.map((u, i) => {
    const at = `upserts[${i}]`;
    if (!isJsonObject(u)) throw invalid(`${at} must be an object`);
    only(u, ['address', 'resource', 'instance'], at);
    if (typeof u.address !== 'string' || u.address === '') {
      throw invalid(`${at}.address must be a non-empty string`);
    }
    addresses.push(u.address);
    if (!isJsonObject(u.resource)) throw invalid(`${at}.resource must be an object`);
    only(u.resource, RESOURCE_KEYS, `${at}.resource`);
    const { module, each, ...rest } = u.resource;
    return {
      ...(module === undefined || module === null || module === '' ? {} : { module }),
      ...rest,
      ...(each === undefined || each === null ? {} : { each }),
      instances: [u.instance],
    } as ResourceV4;
  });
  const outputs = object(o, 'outputs') ?? {};
  only(outputs, ['set', 'remove'], 'outputs');
  const set = object(outputs, 'set') ?? {};
  const remove = keys(outputs, 'remove', false);
  // Validated as a document: instances, resource fields and outputs alike.
  let doc: StateDocumentV4;
  try {
    doc = parseStateDocument({
      version: 4,
      terraform_version: terraformVersion,
      serial: 0,
      lineage: '',
      outputs: set,
      resources,
    });
  } catch (err) {
    if (err instanceof DomainError) throw invalid(inCommitTerms(err.message));
    throw err;
  }
  const deltaUpserts: DeltaUpsert[] = doc.resources.map((r, i) => ({
    address: addresses[i],
    resource: resourceDescriptor(r),
    instance: r.instances[0],
  }));
  return {
    baseVersion: integer(o, 'base_version', 1),
    terraformVersion,
    upserts: deltaUpserts,
    deletes: keys(o, 'deletes', false),
    outputs: { set: doc.outputs as Record<string, OutputV4>, remove },
    counters: counters(o),
    checksum,
  };
}

/** A document's paths in the terms of the commit body they came from. */
function inCommitTerms(message: string): string {
  return message
    .replace(/^resources\[(\d+)\]\.instances\[0\]/, 'upserts[$1].instance')
    .replace(/^resources\[(\d+)\]/, 'upserts[$1].resource')
    .replace(/^outputs/, 'outputs.set');
}

export interface FinishApplyRunRequest {
  status: Exclude<ApplyStatus, 'committed'>;
  errorSummary: string | null;
  outputState: JsonValue | null;
}

const MAX_SUMMARY = 64 * 1024;

export function parseFinishApplyRun(o: JsonObject): FinishApplyRunRequest {
  only(o, ['status', 'error_summary', 'output_state'], 'a finish');
  const status = o.status;
  if (typeof status !== 'string' || !UNCOMMITTED_STATUSES.includes(status as ApplyStatus)) {
    throw invalid(
      `status must be one of ${UNCOMMITTED_STATUSES.join(', ')} (a run commits through /commit)`,
    );
  }
  const summary = o.error_summary ?? null;
  if (summary !== null) {
    if (typeof summary !== 'string') throw invalid('error_summary must be a string');
    if (summary.length > MAX_SUMMARY)
      throw invalid(`error_summary is longer than ${MAX_SUMMARY} characters`);
    const problem = textProblem(summary);
    if (problem !== null) throw invalid(`error_summary ${problem}`);
  }
  const output = o.output_state ?? null;
  if (output !== null && !isJsonObject(output)) {
    throw invalid('output_state must be the state document terraform left (a JSON object)');
  }
  return {
    status: status as FinishApplyRunRequest['status'],
    errorSummary: summary,
    outputState: output,
  };
}

/** A started run on the wire (snake_case), for both lanes' start routes. */
export function startedRunWire(started: StartedApplyRun) {
  return {
    run_id: started.runId,
    state: started.state,
    reservations: started.reservations.map((r) => ({
      id: r.id,
      glob: r.glob,
      mode: r.mode,
      expires_at: r.expiresAt,
    })),
    expires_at: started.expiresAt,
  };
}
