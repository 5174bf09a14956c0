/** What oneResourceState builds. */
export interface OneResourceState {
  serial: number;
  count: number;
  lineage: string;
  /** The resource's name (default `x`). */
  name?: string;
  /** Instance i's attributes (default `{ id: 'id-<i>' }`). */
  attributes?: (i: number) => Record<string, unknown>;
  outputs?: Record<string, { value: unknown; type: unknown }>;
}

/**
 * A state of one `terraform_data` resource of `count` instances keyed 0 …
 * count − 1: the document benches and tests send when only its size (or an
 * attribute's) matters. No provider needed: terraform's builtin one.
 */
export function oneResourceState({
  serial,
  count,
  lineage,
  name = 'x',
  attributes = (i) => ({ id: `id-${i}` }),
  outputs = {},
}: OneResourceState) {
  return {
    version: 4,
    terraform_version: '1.11.4',
    serial,
    lineage,
    outputs,
    resources: [
      {
        mode: 'managed',
        type: 'terraform_data',
        name,
        provider: 'provider["terraform.io/builtin/terraform"]',
        instances: Array.from({ length: count }, (_, i) => ({
          index_key: i,
          schema_version: 0,
          attributes: attributes(i),
          sensitive_attributes: [],
        })),
      },
    ],
    check_results: null,
  };
}
