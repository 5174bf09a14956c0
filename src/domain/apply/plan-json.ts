import { DomainError } from '../shared/domain-error';
import { formatInstanceAddress, parseInstanceAddress } from '../terraform/instance-address';
import { isJsonObject, JsonObject, JsonValue } from '../terraform/json-value';
import { configAddressOf } from './addresses';

export const PLAN_INVALID = 'PLAN.INVALID';

/** What a planned change does to one instance object, in the words of the summary. */
export type ChangeKind = 'create' | 'update' | 'replace' | 'delete' | 'forget' | 'read' | 'no-op';

export interface PlannedChange {
  /** Our instance address (with ` (deposed object …)` for a deposed object). */
  address: string;
  /** The same without the deposed suffix. */
  instance: string;
  /** Module path and resource without instance keys. */
  configAddress: string;
  mode: 'managed' | 'data';
  kind: ChangeKind;
  actions: string[];
  /** Terraform imports the object (an `import` block): it joins the state without a create. */
  importing?: true;
}

export interface OutputChange {
  name: string;
  kind: ChangeKind;
}

/**
 * The parts of `terraform show -json <planfile>` that kl reasons about.
 * `configuration` stays raw: config-graph walks it.
 */
export interface PlanJson {
  terraformVersion: string;
  changes: PlannedChange[];
  outputChanges: OutputChange[];
  /** Root input variables as terraform resolved them (`variables.<name>.value`). */
  variables: Record<string, JsonValue>;
  configuration: JsonObject;
  /** Addresses terraform saw drift on while refreshing. */
  drift: string[];
  errored: boolean;
}

function invalid(what: string): never {
  throw new DomainError(PLAN_INVALID, `terraform show -json: ${what}`);
}

/** Actions as terraform's plan JSON lists them, reduced to one kind. */
export function changeKind(actions: readonly string[]): ChangeKind {
  const key = actions.join(',');
  switch (key) {
    case 'no-op':
    case 'create':
    case 'update':
    case 'delete':
    case 'read':
    case 'forget':
      return key;
    case 'delete,create':
    case 'create,delete':
      return 'replace';
    case 'create,forget':
    case 'forget,create':
      return 'replace';
    default:
      return invalid(`unknown change actions [${actions.join(', ')}]`);
  }
}

/** Does this change write state? Everything but a no-op and a data read does. */
export function isWrite(kind: ChangeKind): boolean {
  return kind !== 'no-op' && kind !== 'read';
}

function strings(value: unknown, what: string): string[] {
  if (!Array.isArray(value) || !value.every((v) => typeof v === 'string')) {
    invalid(`${what} must be a list of strings`);
  }
  return value as string[];
}

/** Parses the JSON value of `terraform show -json <planfile>`. */
export function parsePlanJson(raw: unknown): PlanJson {
  if (!isJsonObject(raw)) invalid('not a JSON object');
  if (typeof raw.format_version !== 'string') invalid('no format_version');
  if (!/^1\./.test(raw.format_version)) invalid(`unsupported format_version ${raw.format_version}`);
  const changes: PlannedChange[] = [];
  const resourceChanges = raw.resource_changes ?? [];
  if (!Array.isArray(resourceChanges)) invalid('resource_changes must be a list');
  for (const rc of resourceChanges) {
    if (!isJsonObject(rc) || typeof rc.address !== 'string' || !isJsonObject(rc.change)) {
      invalid('a resource_changes entry has no address or change');
    }
    const actions = strings(rc.change.actions, `${rc.address} change.actions`);
    const parsed = parseInstanceAddress(rc.address);
    const deposed = typeof rc.deposed === 'string' && rc.deposed !== '' ? rc.deposed : undefined;
    const mode = rc.mode === 'data' ? 'data' : 'managed';
    changes.push({
      address: formatInstanceAddress({ ...parsed, deposed }),
      instance: formatInstanceAddress({ ...parsed, deposed: undefined }),
      configAddress: configAddressOf(parsed),
      mode,
      kind: changeKind(actions),
      actions,
      ...(isJsonObject(rc.change.importing) ? { importing: true as const } : {}),
    });
  }
  const outputChanges: OutputChange[] = [];
  const oc = raw.output_changes ?? {};
  if (!isJsonObject(oc)) invalid('output_changes must be an object');
  for (const [name, change] of Object.entries(oc)) {
    if (!isJsonObject(change)) invalid(`output_changes.${name} must be an object`);
    outputChanges.push({ name, kind: changeKind(strings(change.actions, `output ${name}`)) });
  }
  const variables: Record<string, JsonValue> = {};
  const vars = raw.variables ?? {};
  if (!isJsonObject(vars)) invalid('variables must be an object');
  for (const [name, v] of Object.entries(vars)) {
    if (isJsonObject(v) && v.value !== undefined) variables[name] = v.value;
  }
  const configuration = raw.configuration ?? {};
  if (!isJsonObject(configuration)) invalid('configuration must be an object');
  const drift: string[] = [];
  for (const d of Array.isArray(raw.resource_drift) ? raw.resource_drift : []) {
    if (isJsonObject(d) && typeof d.address === 'string') drift.push(d.address);
  }
  return {
    terraformVersion: typeof raw.terraform_version === 'string' ? raw.terraform_version : '',
    changes,
    outputChanges,
    variables,
    configuration,
    drift,
    errored: raw.errored === true,
  };
}

/** The instance addresses a plan writes (every change but no-op and read), sorted. */
export function writeSetOf(plan: PlanJson): string[] {
  return [...new Set(plan.changes.filter((c) => isWrite(c.kind)).map((c) => c.address))].sort();
}

export interface ChangeCounts {
  create: number;
  update: number;
  replace: number;
  delete: number;
  forget: number;
}

export function countChanges(changes: readonly PlannedChange[]): ChangeCounts {
  const counts: ChangeCounts = { create: 0, update: 0, replace: 0, delete: 0, forget: 0 };
  for (const c of changes) {
    if (c.mode !== 'managed') continue;
    if (c.kind in counts) counts[c.kind as keyof ChangeCounts]++;
  }
  return counts;
}
