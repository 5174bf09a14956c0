import { DomainError } from '../../domain/shared/domain-error';
import { FlatInstance } from '../../domain/terraform';

export interface ProviderConfigRef {
  /** Normalised source address, e.g. `registry.terraform.io/hashicorp/aws`. */
  source: string;
  /** null for the default (unaliased) configuration. */
  alias: string | null;
}

export interface ProviderGroup extends ProviderConfigRef {
  /** The state's provider string, verbatim; one group (and one process) per distinct value. */
  provider: string;
  instances: FlatInstance[];
}

const QUOTED = /(?:^|\.)provider\["([^"]+)"\](?:\.([A-Za-z0-9_-]+))?$/;
// Terraform 0.12 wrote `provider.aws` or `provider.aws.west` before sources existed.
const LEGACY = /(?:^|\.)provider\.([A-Za-z0-9_-]+)(?:\.([A-Za-z0-9_-]+))?$/;

/**
 * Source and alias of a state's provider string, e.g.
 * `module.net.provider["registry.terraform.io/hashicorp/aws"].west`.
 */
export function parseProviderConfigRef(provider: string): ProviderConfigRef {
  const quoted = QUOTED.exec(provider);
  if (quoted) return { source: normaliseSource(quoted[1]), alias: quoted[2] ?? null };
  const legacy = LEGACY.exec(provider);
  if (legacy) return { source: normaliseSource(legacy[1]), alias: legacy[2] ?? null };
  // The document parser takes any provider string; refresh needs one it can resolve.
  throw new DomainError('STATE.INVALID', `"${provider}" is not a provider configuration address`);
}

function normaliseSource(source: string): string {
  const parts = source.toLowerCase().split('/');
  if (parts.length === 1) return `registry.terraform.io/hashicorp/${parts[0]}`;
  if (parts.length === 2) return `registry.terraform.io/${parts[0]}/${parts[1]}`;
  return parts.join('/');
}

/**
 * Terraform's own resources (`terraform_data`): implemented inside terraform,
 * so there is no plugin binary to start and nothing remote to read.
 */
export function isBuiltInProvider(source: string): boolean {
  return source === 'terraform.io/builtin/terraform';
}

/**
 * Managed instances grouped by provider configuration, in document order.
 * Data sources are skipped: they are re-read by every plan and have nothing
 * to refresh in state.
 */
export function groupByProvider(instances: readonly FlatInstance[]): ProviderGroup[] {
  const groups = new Map<string, ProviderGroup>();
  for (const flat of instances) {
    if (flat.resource.mode !== 'managed') continue;
    const provider = flat.resource.provider;
    let group = groups.get(provider);
    if (!group) {
      group = { provider, ...parseProviderConfigRef(provider), instances: [] };
      groups.set(provider, group);
    }
    group.instances.push(flat);
  }
  return [...groups.values()];
}

/** How messages name a group: `provider <source>`, with its alias when it has one. */
export function groupLabel(group: ProviderConfigRef): string {
  return group.alias
    ? `provider ${group.source} (alias ${group.alias})`
    : `provider ${group.source}`;
}

/** A provider configuration of a document and how many managed instances it serves. */
export interface ProviderCount extends ProviderConfigRef {
  provider: string;
  instances: number;
}

/**
 * The document's serial and its provider configurations as `groupByProvider`
 * would group them (managed instances, document order), read with the
 * platform's JSON parser: about a fifth of the lossless parse's CPU, so the
 * refresh can start the providers a state needs before it has parsed the
 * state. Numbers are not kept exactly, and none is needed here. null for a
 * document this cannot read (the lossless parse reports what is wrong).
 */
export function providerCensus(text: string): { serial: number; counts: ProviderCount[] } | null {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return null;
  }
  const { serial, resources } = (doc ?? {}) as { serial?: unknown; resources?: unknown };
  if (typeof serial !== 'number' || !Array.isArray(resources)) return null;
  const counts = new Map<string, ProviderCount>();
  for (const r of resources as { mode?: unknown; provider?: unknown; instances?: unknown }[]) {
    if (r?.mode !== 'managed' || typeof r.provider !== 'string') continue;
    if (!Array.isArray(r.instances) || r.instances.length === 0) continue;
    let count = counts.get(r.provider);
    if (!count) {
      let ref: ProviderConfigRef;
      try {
        ref = parseProviderConfigRef(r.provider);
      } catch {
        return null;
      }
      count = { provider: r.provider, ...ref, instances: 0 };
      counts.set(r.provider, count);
    }
    count.instances += r.instances.length;
  }
  return { serial, counts: [...counts.values()] };
}
