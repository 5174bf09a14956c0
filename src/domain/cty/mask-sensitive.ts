import { AttributePath, fromStatePath } from './attribute-path';

/** What `terraform state show` prints in place of a sensitive value. */
export const SENSITIVE_MASK = '(sensitive value)';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json | undefined };

/**
 * `attributes` with every value under a path of `sensitiveAttributes` (an
 * instance's `sensitive_attributes`, as terraform writes it) replaced by
 * SENSITIVE_MASK. The input is not changed. A path that does not lead to a
 * value masks nothing; one we cannot read at all masks everything.
 */
export function maskSensitive<T extends Json>(attributes: T, sensitiveAttributes: unknown): T {
  if (!Array.isArray(sensitiveAttributes)) return attributes;
  let out: Json = attributes;
  for (const raw of sensitiveAttributes as unknown[]) {
    out = maskAt(out, fromStatePath(raw));
  }
  return out as T;
}

function maskAt(value: Json, path: AttributePath): Json {
  if (path.length === 0) return SENSITIVE_MASK;
  const [step, ...rest] = path;
  if (step.kind === 'index') {
    if (!Array.isArray(value) || step.index >= value.length) return value;
    const copy = [...value];
    copy[step.index] = maskAt(copy[step.index], rest);
    return copy;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
  const member = step.kind === 'attribute' ? step.name : step.key;
  if (!Object.prototype.hasOwnProperty.call(value, member) || value[member] === undefined) {
    return value;
  }
  return { ...value, [member]: maskAt(value[member] as Json, rest) };
}

/**
 * Whether the value at `path` is, or holds, a value terraform marked
 * sensitive (`sensitiveAttributes` as in `maskSensitive`): the dashboard
 * masks such a value whole. Unreadable marks make every path sensitive.
 */
export function touchesSensitive(path: AttributePath, sensitiveAttributes: unknown): boolean {
  if (!Array.isArray(sensitiveAttributes)) return false;
  return (sensitiveAttributes as unknown[]).some((raw) => {
    const marked = fromStatePath(raw);
    const n = Math.min(marked.length, path.length);
    for (let i = 0; i < n; i++) if (!sameStep(marked[i], path[i])) return false;
    return true;
  });
}

function sameStep(a: AttributePath[number], b: AttributePath[number]): boolean {
  if (a.kind === 'index' || b.kind === 'index') {
    return a.kind === 'index' && b.kind === 'index' && a.index === b.index;
  }
  // State JSON does not say map from object: `tags.Name` and `tags["Name"]` are one place.
  return (a.kind === 'attribute' ? a.name : a.key) === (b.kind === 'attribute' ? b.name : b.key);
}
