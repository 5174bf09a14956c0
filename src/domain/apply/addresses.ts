import {
  formatInstanceAddress,
  formatModulePath,
  formatResourceAddress,
  InstanceAddress,
  parseInstanceAddress,
} from '../terraform/instance-address';

/**
 * The configuration address of an instance: module path and resource without
 * any instance key (`module.web.terraform_data.server` for
 * `module.web.terraform_data.server[1]`). Dependencies in state and
 * references in configuration are written at this level.
 */
export function configAddressOf(a: InstanceAddress): string {
  return formatResourceAddress({ ...a, module: a.module.map((s) => ({ name: s.name })) });
}

/** The instance address without a deposed suffix: what a reservation names. */
export function reservableAddress(address: string): string {
  const a = parseInstanceAddress(address);
  return formatInstanceAddress({ ...a, deposed: undefined });
}

/**
 * Every module instance prefix of an address, shortest first:
 * `module.a["x"].module.b[0].t.n` → [`module.a["x"]`, `module.a["x"].module.b[0]`].
 */
export function modulePrefixes(a: InstanceAddress): string[] {
  const out: string[] = [];
  for (let i = 1; i <= a.module.length; i++) out.push(formatModulePath(a.module.slice(0, i)));
  return out;
}

/** Is `address` inside the module instance `prefix` (`module.web`, `module.a["x"]`)? */
export function isUnderModule(address: string, prefix: string): boolean {
  return address.startsWith(prefix + '.');
}
