import { changedPaths } from '../terraform/changed-paths';
import { isJsonObject, JsonObject, JsonValue } from '../terraform/json-value';

/**
 * The paths at which a provider's read differs from the recorded object,
 * once differences of spelling only are set aside. Empty while the hashes
 * differ means the read is a normalization, not drift.
 *
 * Spelling only, and nothing more, because terraform treats these as the same
 * value:
 * - null, an empty list/set (`[]`) and an empty map or attribute-less object
 *   (`{}`). The legacy plugin SDK (most of the AWS provider) cannot tell them
 *   apart, and terraform core normalizes null nested-block collections to
 *   empty ones; e.g. the AWS provider reads `tags = {}` back where the apply
 *   stored null, and a live `terraform plan` plans nothing for it.
 * - an object member that is absent and one that is null: terraform decodes
 *   state written by an older provider release, which lacks a newer
 *   attribute, with that attribute null.
 *
 * Everything else stays drift, notably `""` against null: terraform and
 * plugin-framework providers keep them apart, so a live plan can act on it.
 */
export function driftPaths(before: JsonValue | undefined, after: JsonValue | undefined): string[] {
  return changedPaths(spelled(before), spelled(after));
}

/**
 * One spelling per value: empty collections become null and null members
 * are dropped. An object whose members are all null keeps its (now empty)
 * shape: a present nested block is not an absent one.
 */
function spelled(value: JsonValue | undefined): JsonValue {
  if (value === undefined || value === null) return null;
  if (Array.isArray(value)) return value.length === 0 ? null : value.map(spelled);
  if (!isJsonObject(value)) return value;
  const keys = Object.keys(value).filter((k) => value[k] !== undefined);
  if (keys.length === 0) return null;
  const out: JsonObject = {};
  for (const k of keys) {
    const v = spelled(value[k]);
    if (v !== null) out[k] = v;
  }
  return out;
}
