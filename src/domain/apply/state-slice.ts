import { canonicalJson } from '../terraform/canonical-json';
import { parseModulePath } from '../terraform/instance-address';
import { JsonValue } from '../terraform/json-value';
import { FlatInstance, flattenInstances, ResourceDescriptor } from '../terraform/state-instances';
import {
  InstanceObjectV4,
  OutputV4,
  ResourceV4,
  StateDocumentV4,
} from '../terraform/state-document';
import { configAddressOf } from './addresses';

/**
 * What a scoped configuration declares at the root: resource configuration
 * addresses (`terraform_data.a`, `data.x.y`) and module calls (`module.web`,
 * standing for everything inside). null = the whole configuration, whose
 * slice is the whole trunk (so resources removed from the HCL are destroyed).
 */
export type Footprint = readonly string[] | null;

function inFootprint(configAddress: string, footprint: readonly string[]): boolean {
  return footprint.some(
    (entry) =>
      configAddress === entry ||
      (entry.startsWith('module.') && configAddress.startsWith(entry + '.')),
  );
}

function resourceConfigAddress(r: ResourceV4): string {
  return configAddressOf({
    module: parseModulePath(r.module ?? ''),
    mode: r.mode,
    type: r.type,
    name: r.name,
  });
}

/**
 * The state terraform works on in kl's private directory: the trunk's
 * resources that the configuration describes, the trunk's lineage, serial
 * and every output (ADR 0007 addendum: anything described but missing would
 * be planned as a create).
 */
export function sliceOf(trunk: StateDocumentV4, footprint: Footprint): StateDocumentV4 {
  if (footprint === null) return trunk;
  return {
    ...trunk,
    resources: trunk.resources.filter((r) => inFootprint(resourceConfigAddress(r), footprint)),
  };
}

export interface InstanceUpsert {
  address: string;
  resource: ResourceDescriptor;
  /** The instance object exactly as terraform wrote it. */
  instance: InstanceObjectV4;
}

export interface ApplyDelta {
  upserts: InstanceUpsert[];
  deletes: string[];
  outputs: { set: Record<string, OutputV4>; remove: string[] };
  /** Changes terraform made outside what the plan allowed; non-empty = commit nothing. */
  violations: string[];
}

function outputText(o: OutputV4 | undefined): string | null {
  return o === undefined ? null : canonicalJson(o as unknown as JsonValue);
}

/**
 * The row-level delta of an apply: the write-set instances as terraform left
 * them and the outputs it was allowed to change, compared canonically (its
 * re-serialisation of untouched instances is not a change). Any other
 * managed instance or declared output that changed is a violation. Data
 * sources are re-read by every run and are never committed.
 */
export function applyDelta(args: {
  slice: StateDocumentV4;
  result: StateDocumentV4;
  writeSet: readonly string[];
  outputWrites: readonly string[];
}): ApplyDelta {
  const before = new Map<string, FlatInstance>();
  for (const f of flattenInstances(args.slice)) before.set(f.address, f);
  const after = new Map<string, FlatInstance>();
  for (const f of flattenInstances(args.result)) after.set(f.address, f);
  const writes = new Set(args.writeSet);

  const upserts: InstanceUpsert[] = [];
  const deletes: string[] = [];
  const violations: string[] = [];
  for (const address of new Set([...before.keys(), ...after.keys()])) {
    const b = before.get(address);
    const a = after.get(address);
    if ((a ?? b)!.resource.mode === 'data') continue;
    if (writes.has(address)) {
      if (a) upserts.push({ address, resource: a.resource, instance: a.instance });
      else deletes.push(address);
      continue;
    }
    if (a?.hash !== b?.hash) {
      violations.push(
        `${address} (${!b ? 'created' : !a ? 'removed' : 'changed'} outside the write set)`,
      );
    }
  }

  const allowed = new Set(args.outputWrites);
  const set: Record<string, OutputV4> = {};
  const remove: string[] = [];
  const names = new Set([...Object.keys(args.slice.outputs), ...Object.keys(args.result.outputs)]);
  for (const name of [...names].sort()) {
    const b = args.slice.outputs[name];
    const a = args.result.outputs[name];
    if (outputText(a) === outputText(b)) continue;
    if (allowed.has(name)) {
      if (a) set[name] = a;
      else remove.push(name);
    } else if (a) {
      // Gone without being allowed: the scoped configuration does not declare it.
      violations.push(`output ${name} (changed outside the write set)`);
    }
  }
  upserts.sort((x, y) => (x.address < y.address ? -1 : 1));
  return {
    upserts,
    deletes: deletes.sort(),
    outputs: { set, remove },
    violations: violations.sort(),
  };
}
