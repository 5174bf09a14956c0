import { ProviderError } from './provider-error';

export const DEFAULT_REGISTRY = 'registry.terraform.io';

export interface ProviderAddress {
  hostname: string;
  namespace: string;
  type: string;
}

/**
 * Normalises `aws`, `hashicorp/aws`, `registry.terraform.io/hashicorp/aws`
 * and a state file's `provider["registry.terraform.io/hashicorp/aws"].alias`
 * to one address. Terraform treats the parts case-insensitively.
 */
export function parseProviderSource(source: string): ProviderAddress {
  let text = source.trim();
  const quoted = /^provider\["([^"]+)"\](?:\.[A-Za-z0-9_-]+)?$/.exec(text);
  if (quoted) text = quoted[1];
  const parts = text.toLowerCase().split('/');
  const valid = (p: string): boolean => /^[a-z0-9][a-z0-9._-]*$/.test(p);
  if (parts.length < 1 || parts.length > 3 || !parts.every(valid)) {
    throw new ProviderError(
      'PROVIDER.INVALID_SOURCE',
      `"${source}" is not a provider source address`,
      { source },
    );
  }
  if (parts.length === 1)
    return { hostname: DEFAULT_REGISTRY, namespace: 'hashicorp', type: parts[0] };
  if (parts.length === 2)
    return { hostname: DEFAULT_REGISTRY, namespace: parts[0], type: parts[1] };
  return { hostname: parts[0], namespace: parts[1], type: parts[2] };
}

export function formatProviderSource(a: ProviderAddress): string {
  return `${a.hostname}/${a.namespace}/${a.type}`;
}

export function normaliseProviderSource(source: string): string {
  return formatProviderSource(parseProviderSource(source));
}
