import { DomainError } from '../shared/domain-error';
import { isJsonObject, JsonObject, JsonValue } from '../terraform/json-value';
import { APPLY_LANES, ApplyLane } from './apply-run.events';
import { ChangeCounts, ChangeKind } from './plan-json';

export const KL_PLAN_FORMAT = 'kl-plan/1';
export const KL_PLAN_INVALID = 'PLAN.FILE_INVALID';

/**
 * `kl-plan.json`: what `kl plan` predicted and `kl apply` holds terraform to.
 * It is kl's own descriptor, not terraform's plan file: `kl apply` re-plans
 * in its own directory and refuses to apply anything else. It holds the
 * root input variables terraform planned with, so it is as secret as a
 * terraform plan file.
 */
export interface KlPlan {
  format: typeof KL_PLAN_FORMAT;
  createdAt: string;
  server: string;
  state: string;
  baseVersion: number;
  baseSerial: number;
  lineage: string;
  terraformVersion: string;
  /** Absolute path of the configuration directory. */
  configDir: string;
  /** `-f` files (relative to configDir); null = the whole configuration. */
  files: string[] | null;
  targets: string[];
  refresh: boolean;
  variables: Record<string, JsonValue>;
  changes: { address: string; action: ChangeKind }[];
  writeSet: string[];
  readSet: string[];
  outputWrites: string[];
  /** Root resources and module calls the scoped configuration declares; null when unscoped. */
  footprint: string[] | null;
  reservations: { write: string[]; read: string[] };
  counts: ChangeCounts;
  summary: string;
  /**
   * The lane `kl apply` runs on (ADR 0029 D8): `state-engine` (trusted: the
   * coarse lock, the server's reservations, the delta commit on the engine)
   * only when the server proved the scope safe; `full` otherwise.
   */
  lane: ApplyLane;
  /** Why that lane: the protocol asked for, and why kl fell back when it did. */
  laneReasons: string[];
  /** What the server's scope expansion said; null when kl did not ask (protocol http). */
  scope: PlanScope | null;
}

/** The operator-facing part of a scope expansion (docs/state-engine.md). */
export interface PlanScope {
  provablySafe: boolean;
  unresolved: { candidate: string; classification: string }[];
  closure: { address: string; direction: string; via: string }[];
  /** The slice terraform planned on, and the whole state's size, when the slice was fetched. */
  slice: { instances: number; bytes: number; stateInstances: number } | null;
}

function fail(what: string): never {
  throw new DomainError(KL_PLAN_INVALID, `not a kl plan file: ${what}`);
}

function str(o: JsonObject, k: string): string {
  if (typeof o[k] !== 'string') fail(`${k} must be a string`);
  return o[k] as string;
}

function int(o: JsonObject, k: string): number {
  const v = o[k];
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) {
    fail(`${k} must be a non-negative integer`);
  }
  return v;
}

function list(o: JsonObject, k: string): string[] {
  const v = o[k];
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) {
    fail(`${k} must be a list of strings`);
  }
  return v as string[];
}

/** The file as written on disk (snake_case like the rest of kl's JSON). */
export function klPlanToJson(p: KlPlan): JsonObject {
  return {
    format: p.format,
    created_at: p.createdAt,
    server: p.server,
    state: p.state,
    base_version: p.baseVersion,
    base_serial: p.baseSerial,
    lineage: p.lineage,
    terraform_version: p.terraformVersion,
    config_dir: p.configDir,
    files: p.files,
    targets: p.targets,
    refresh: p.refresh,
    summary: p.summary,
    counts: { ...p.counts },
    reservations: { write: p.reservations.write, read: p.reservations.read },
    changes: p.changes.map((c) => ({ address: c.address, action: c.action })),
    write_set: p.writeSet,
    read_set: p.readSet,
    output_writes: p.outputWrites,
    footprint: p.footprint,
    lane: p.lane,
    lane_reasons: p.laneReasons,
    scope:
      p.scope === null
        ? null
        : {
            provably_safe: p.scope.provablySafe,
            unresolved: p.scope.unresolved.map((u) => ({ ...u })),
            closure: p.scope.closure.map((c) => ({ ...c })),
            slice:
              p.scope.slice === null
                ? null
                : {
                    instances: p.scope.slice.instances,
                    bytes: p.scope.slice.bytes,
                    state_instances: p.scope.slice.stateInstances,
                  },
          },
    variables: p.variables,
  };
}

function strings<K extends string>(o: JsonObject, keys: readonly K[], what: string) {
  const out = {} as Record<K, string>;
  for (const k of keys) {
    if (typeof o[k] !== 'string') fail(`${what}.${k} must be a string`);
    out[k] = o[k] as string;
  }
  return out;
}

/** A plan file written before lanes existed ran on the full-trunk lane. */
function scopeFromJson(raw: JsonValue | undefined): PlanScope | null {
  if (raw === undefined || raw === null) return null;
  if (!isJsonObject(raw)) fail('scope must be an object or null');
  if (typeof raw.provably_safe !== 'boolean') fail('scope.provably_safe must be true or false');
  const items = (k: string) => {
    const v = raw[k];
    if (!Array.isArray(v) || !v.every(isJsonObject)) fail(`scope.${k} must be a list of objects`);
    return v as JsonObject[];
  };
  let slice: PlanScope['slice'] = null;
  if (raw.slice !== null && raw.slice !== undefined) {
    if (!isJsonObject(raw.slice)) fail('scope.slice must be an object or null');
    slice = {
      instances: int(raw.slice, 'instances'),
      bytes: int(raw.slice, 'bytes'),
      stateInstances: int(raw.slice, 'state_instances'),
    };
  }
  return {
    provablySafe: raw.provably_safe,
    unresolved: items('unresolved').map((u) =>
      strings(u, ['candidate', 'classification'], 'scope.unresolved'),
    ),
    closure: items('closure').map((c) =>
      strings(c, ['address', 'direction', 'via'], 'scope.closure'),
    ),
    slice,
  };
}

const KINDS: readonly ChangeKind[] = ['create', 'update', 'replace', 'delete', 'forget'];

/** Parses and checks a kl plan file's JSON value. */
export function klPlanFromJson(raw: unknown): KlPlan {
  if (!isJsonObject(raw)) fail('not a JSON object');
  if (raw.format !== KL_PLAN_FORMAT) fail(`format must be "${KL_PLAN_FORMAT}"`);
  const reservations = isJsonObject(raw.reservations) ? raw.reservations : fail('no reservations');
  const counts = isJsonObject(raw.counts) ? raw.counts : fail('no counts');
  const changes = Array.isArray(raw.changes) ? raw.changes : fail('changes must be a list');
  const variables = isJsonObject(raw.variables) ? raw.variables : fail('no variables');
  const files = raw.files === null ? null : list(raw, 'files');
  const footprint = raw.footprint === null ? null : list(raw, 'footprint');
  if (typeof raw.refresh !== 'boolean') fail('refresh must be true or false');
  const lane = raw.lane ?? 'full';
  if (typeof lane !== 'string' || !APPLY_LANES.includes(lane as ApplyLane)) {
    fail(`lane must be one of ${APPLY_LANES.join(', ')}`);
  }
  const scope = scopeFromJson(raw.scope);
  if (lane === 'state-engine' && scope?.provablySafe !== true) {
    fail('lane state-engine needs a scope the server proved safe');
  }
  return {
    format: KL_PLAN_FORMAT,
    createdAt: str(raw, 'created_at'),
    server: str(raw, 'server'),
    state: str(raw, 'state'),
    baseVersion: int(raw, 'base_version'),
    baseSerial: int(raw, 'base_serial'),
    lineage: str(raw, 'lineage'),
    terraformVersion: str(raw, 'terraform_version'),
    configDir: str(raw, 'config_dir'),
    files,
    targets: list(raw, 'targets'),
    refresh: raw.refresh,
    variables: variables as Record<string, JsonValue>,
    changes: changes.map((c) => {
      if (!isJsonObject(c) || typeof c.address !== 'string') fail('a change has no address');
      if (!KINDS.includes(c.action as ChangeKind)) fail(`${c.address}: unknown action`);
      return { address: c.address, action: c.action as ChangeKind };
    }),
    writeSet: list(raw, 'write_set'),
    readSet: list(raw, 'read_set'),
    outputWrites: list(raw, 'output_writes'),
    footprint,
    reservations: { write: list(reservations, 'write'), read: list(reservations, 'read') },
    counts: {
      create: int(counts, 'create'),
      update: int(counts, 'update'),
      replace: int(counts, 'replace'),
      delete: int(counts, 'delete'),
      forget: int(counts, 'forget'),
    },
    summary: str(raw, 'summary'),
    lane: lane as ApplyLane,
    laneReasons: raw.lane_reasons === undefined ? [] : list(raw, 'lane_reasons'),
    scope,
  };
}

/** `1 to create, 0 to update, 1 to replace, 0 to delete` (forget only when there is any). */
export function describeCounts(c: ChangeCounts): string {
  const parts = [
    `${c.create} to create`,
    `${c.update} to update`,
    `${c.replace} to replace`,
    `${c.delete} to delete`,
  ];
  if (c.forget > 0) parts.push(`${c.forget} to forget`);
  return parts.join(', ');
}
