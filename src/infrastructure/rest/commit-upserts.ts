import type { InstanceUpsert } from '../../domain/apply/state-slice';

/**
 * A commit's upserts as kld's commit endpoints take them (docs/api.md): the
 * resource's six members only, since the endpoints refuse any other.
 */
export function commitUpserts(upserts: readonly InstanceUpsert[]): object[] {
  return upserts.map((u) => ({
    address: u.address,
    resource: {
      module: u.resource.module,
      mode: u.resource.mode,
      type: u.resource.type,
      name: u.resource.name,
      provider: u.resource.provider,
      each: u.resource.each,
    },
    instance: u.instance,
  }));
}
