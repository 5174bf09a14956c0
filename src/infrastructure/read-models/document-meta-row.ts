import type { JsonObject, JsonValue, OutputV4, StateDocumentMeta } from '../../domain/terraform';

/** The columns of `state_versions` that a version's document carries at its top level. */
export interface DocumentMetaColumns {
  serial: string;
  lineage: string;
  terraform_version: string;
  outputs: Record<string, OutputV4>;
  check_results: JsonValue | null;
  extra: JsonObject | null;
}

/** A `state_versions` row's top level of its document (buildDocument's `meta`). */
export function documentMetaOf(v: DocumentMetaColumns): StateDocumentMeta {
  return {
    terraformVersion: v.terraform_version,
    serial: Number(v.serial),
    lineage: v.lineage,
    outputs: v.outputs,
    checkResults: v.check_results,
    extra: v.extra ?? {},
  };
}
