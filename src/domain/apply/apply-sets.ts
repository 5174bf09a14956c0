import { flattenInstances } from '../terraform/state-instances';
import { StateDocumentV4 } from '../terraform/state-document';
import { parseInstanceAddress } from '../terraform/instance-address';
import { configAddressOf, reservableAddress } from './addresses';
import {
  buildConfigGraph,
  dependencyClosure,
  downstreamClosure,
  LocalsLookup,
  outputsReading,
} from './config-graph';
import { isWrite, PlanJson, writeSetOf } from './plan-json';
import { collapseToGlobs } from './reservation-globs';

/** Outputs are reserved under this pseudo-address so two applies never race on one. */
export const OUTPUT_GLOB_PREFIX = 'output.';

export interface ApplySets {
  /** Instance addresses the plan changes (deposed objects with their suffix). */
  writeSet: string[];
  /** Instance addresses upstream or downstream of the write set that it does not change. */
  readSet: string[];
  /** Root outputs the apply may change (or remove). */
  outputWrites: string[];
  reservations: { write: string[]; read: string[] };
}

/** `dependencies` of every instance in a document, merged per resource configuration address. */
export function stateDependencies(doc: StateDocumentV4): Map<string, string[]> {
  const out = new Map<string, Set<string>>();
  for (const flat of flattenInstances(doc, () => '')) {
    const deps = flat.instance.dependencies;
    if (!Array.isArray(deps) || deps.length === 0) continue;
    const from = configAddressOf(parseInstanceAddress(flat.address));
    let set = out.get(from);
    if (!set) out.set(from, (set = new Set()));
    for (const d of deps) set.add(d);
  }
  return new Map([...out].map(([k, v]) => [k, [...v]]));
}

/**
 * Write set, read set and the reservations covering them, for a plan made
 * against `slice` (the state terraform planned with).
 */
export function applySets(
  plan: PlanJson,
  slice: StateDocumentV4,
  locals: LocalsLookup,
  options: { scoped: boolean },
): ApplySets {
  const writeSet = writeSetOf(plan);
  const graph = buildConfigGraph(plan.configuration, locals, stateDependencies(slice));

  // Instances known by configuration address: the slice's and the plan's.
  const byConfig = new Map<string, Set<string>>();
  const universe = new Set<string>();
  const note = (instance: string) => {
    universe.add(instance);
    const config = configAddressOf(parseInstanceAddress(instance));
    let set = byConfig.get(config);
    if (!set) byConfig.set(config, (set = new Set()));
    set.add(instance);
  };
  for (const flat of flattenInstances(slice, () => '')) note(reservableAddress(flat.address));
  for (const change of plan.changes) note(change.instance);

  const written = new Set(writeSet.map(reservableAddress));
  const writtenConfig = new Set([...written].map((a) => configAddressOf(parseInstanceAddress(a))));
  const closure = dependencyClosure(graph, writtenConfig);
  const read = new Set<string>();
  for (const config of closure) {
    for (const instance of byConfig.get(config) ?? [])
      if (!written.has(instance)) read.add(instance);
  }

  // An output changes when it reads a written resource or anything downstream of one.
  const touched = new Set([...writtenConfig, ...downstreamClosure(graph, writtenConfig)]);
  const outputWrites = new Set(outputsReading(graph, touched));
  for (const oc of plan.outputChanges) {
    // A scoped configuration does not declare the trunk's other outputs;
    // terraform plans them away, and kl leaves them alone.
    if (options.scoped && oc.kind === 'delete') continue;
    if (isWrite(oc.kind)) outputWrites.add(oc.name);
  }

  const readSet = [...read].sort();
  const write = collapseToGlobs(written, universe);
  for (const name of [...outputWrites].sort()) write.push(OUTPUT_GLOB_PREFIX + name);
  return {
    writeSet,
    readSet,
    outputWrites: [...outputWrites].sort(),
    reservations: { write, read: collapseToGlobs(read, universe) },
  };
}
