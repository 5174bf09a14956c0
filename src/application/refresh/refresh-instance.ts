import { changedPaths, driftPaths } from '../../domain/refresh';
import { canonicalHash, FlatInstance, InstanceObjectV4 } from '../../domain/terraform';
import { Halted, untilHalted } from './async-limits';
import { oneLine } from './one-line';
import type { ProviderState, RefreshProvider } from './provider-opener.port';
import type { InstanceResult } from './refresh-run-context';

/**
 * Reads one instance through its provider (upgrading its stored object to
 * the provider's schema version first) and classifies what came back:
 * unchanged, normalized (same object, another spelling), drifted or gone;
 * failed for anything the provider or the stored object refuses. null when
 * the run halted while the read was in flight: the instance has no outcome.
 */
export async function refreshInstance(
  provider: RefreshProvider,
  flat: FlatInstance,
  halt: AbortSignal,
): Promise<InstanceResult | null> {
  const { instance, resource } = flat;
  const before = instance.attributes;
  if (!before) {
    return failure(flat, 'has no JSON attributes (pre-0.12 flatmap state is not supported)');
  }
  const schema = provider.schema.resourceSchemas[resource.type];
  if (!schema) {
    return failure(
      flat,
      `${provider.source} ${provider.version} has no resource type ${resource.type}`,
    );
  }
  if (instance.schema_version > schema.version) {
    return failure(
      flat,
      `was written with schema version ${instance.schema_version} by a newer provider; ${provider.source} ${provider.version} has version ${schema.version}`,
    );
  }
  try {
    let current: ProviderState = { attributes: before };
    if (instance.schema_version < schema.version) {
      current = await untilHalted(
        provider.upgradeResourceState(resource.type, instance.schema_version, before),
        halt,
      );
    }
    const read = await untilHalted(
      provider.readResource(resource.type, current, decodePrivate(instance.private)),
      halt,
    );
    const beforeHash = canonicalHash(before);
    const base = { address: flat.address, provider: resource.provider, beforeHash };
    if (read.newState === null) {
      return {
        result: { ...base, outcome: 'gone', afterHash: null, changedPaths: [] },
        instance: null,
      };
    }
    const after = read.newState.attributes;
    const afterHash = canonicalHash(after);
    const refreshed: InstanceObjectV4 = {
      ...instance,
      schema_version: schema.version,
      attributes: after,
    };
    delete refreshed.private;
    if (read.private.length > 0) refreshed.private = Buffer.from(read.private).toString('base64');
    // The read is stored either way, so a plan -refresh=false sees what a live plan sees.
    const drift = afterHash === beforeHash ? [] : driftPaths(before, after);
    const outcome =
      afterHash === beforeHash ? 'unchanged' : drift.length > 0 ? 'drifted' : 'normalized';
    return {
      result: {
        ...base,
        outcome,
        afterHash,
        changedPaths: outcome === 'normalized' ? changedPaths(before, after) : drift,
      },
      instance: refreshed,
    };
  } catch (e) {
    // An error caused by our own Stop is the halt, not this resource's failure.
    if (e instanceof Halted || halt.aborted) return null;
    return failure(flat, oneLine(e));
  }
}

export function failure(flat: FlatInstance, message: string): InstanceResult {
  return {
    result: {
      address: flat.address,
      provider: flat.resource.provider,
      outcome: 'failed',
      beforeHash: flat.instance.attributes ? canonicalHash(flat.instance.attributes) : '',
      afterHash: null,
      changedPaths: [],
      error: message,
    },
    instance: null,
  };
}

/** A built-in instance no plugin reads: recorded, and kept in the document exactly as it was. */
export function skipped(flat: FlatInstance): InstanceResult {
  const hash = flat.instance.attributes ? canonicalHash(flat.instance.attributes) : '';
  return {
    result: {
      address: flat.address,
      provider: flat.resource.provider,
      outcome: 'skipped',
      beforeHash: hash,
      afterHash: hash,
      changedPaths: [],
    },
    instance: flat.instance,
  };
}

function decodePrivate(text: string | undefined): Uint8Array | undefined {
  return text ? new Uint8Array(Buffer.from(text, 'base64')) : undefined;
}
