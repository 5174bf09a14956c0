import { JsonObject } from '../../domain/terraform/json-value';
import { ResourceDescriptor } from '../../domain/terraform/state-instances';

/** The columns of `resources` that describe an instance's resource. */
export interface DescriptorColumns {
  module_path: ResourceDescriptor['module'];
  mode: ResourceDescriptor['mode'];
  type: string;
  name: string;
  provider: string;
  each_mode: ResourceDescriptor['each'];
  resource_extra: JsonObject | null;
}

/** A `resources` row's resource, as a document's instance carries it. */
export function descriptorOf(r: DescriptorColumns): ResourceDescriptor {
  const d: ResourceDescriptor = {
    module: r.module_path,
    mode: r.mode,
    type: r.type,
    name: r.name,
    provider: r.provider,
    each: r.each_mode,
  };
  if (r.resource_extra !== null) d.extra = r.resource_extra;
  return d;
}
