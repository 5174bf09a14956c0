import { AttributePath, renderPath } from '../cty/attribute-path';
import { isJsonObject, JsonObject, JsonValue } from './json-value';

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_-]*$/;

/**
 * The paths at which two JSON values differ, rendered as Terraform prints
 * them (`tags.Name`, `ingress[0].from_port`, `labels["app.kubernetes.io/name"]`).
 * State JSON does not say whether an object is a map or an object type, so a
 * key that reads as an identifier is shown as an attribute. Lists of unequal
 * length are reported as a whole: index-by-index comparison after an insert
 * would call every later element changed.
 */
export function changedPaths(
  before: JsonValue | undefined,
  after: JsonValue | undefined,
): string[] {
  return changedValues(before, after).map((c) => c.rendered);
}

/** One place two JSON values differ, with the value on each side (undefined when absent). */
export interface ValueChange {
  path: AttributePath;
  /** As `changedPaths` renders it. */
  rendered: string;
  before: JsonValue | undefined;
  after: JsonValue | undefined;
}

/** `changedPaths` with the values either side of each path (the dashboard's diff shows them). */
export function changedValues(
  before: JsonValue | undefined,
  after: JsonValue | undefined,
): ValueChange[] {
  const out: ValueChange[] = [];
  walk(before, after, [], out);
  return out;
}

function walk(
  a: JsonValue | undefined,
  b: JsonValue | undefined,
  path: AttributePath,
  out: ValueChange[],
): void {
  if (isJsonObject(a) && isJsonObject(b)) {
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
    for (const k of keys) {
      const step = IDENTIFIER.test(k)
        ? ({ kind: 'attribute', name: k } as const)
        : ({ kind: 'key', key: k } as const);
      walk(a[k], b[k], [...path, step], out);
    }
    return;
  }
  if (Array.isArray(a) && Array.isArray(b) && a.length === b.length) {
    a.forEach((v, i) => walk(v, b[i], [...path, { kind: 'index', index: i }], out));
    return;
  }
  if (!sameJson(a, b)) {
    out.push({
      path,
      rendered: path.length ? renderPath(path) : '(whole value)',
      before: a,
      after: b,
    });
  }
}

function sameJson(a: JsonValue | undefined, b: JsonValue | undefined): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a) && Array.isArray(b)) {
    return a.length === b.length && a.every((v, i) => sameJson(v, b[i]));
  }
  const present = (o: JsonObject) => Object.keys(o).filter((k) => o[k] !== undefined);
  const ao = a as JsonObject;
  const bo = b as JsonObject;
  const keys = present(ao);
  return keys.length === present(bo).length && keys.every((k) => sameJson(ao[k], bo[k]));
}
