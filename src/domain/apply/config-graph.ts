import { isJsonObject, JsonObject, JsonValue } from '../terraform/json-value';

/**
 * Resource-level dependency edges of a configuration, from the references
 * terraform lists in `terraform show -json`'s `configuration` section, with
 * variables, locals and module outputs resolved to the resources behind them.
 * Terraform leaves locals out of that section, so their references come from
 * the HCL (`locals` below); a module whose locals are unknown (a remote
 * module) is treated as if every local there read every resource there.
 */

/** Local values of one module: name → the references of its expression. */
export type ModuleLocals = ReadonlyMap<string, readonly string[]>;

/**
 * Module call path (`[]` root, `['web']`, `['web', 'inner']`) → its locals;
 * undefined when they are unknown.
 */
export type LocalsLookup = (path: readonly string[]) => ModuleLocals | undefined;

interface ModuleConfig {
  path: string[];
  resources: Map<string, JsonObject>;
  calls: Map<string, JsonObject>;
  outputs: Map<string, JsonObject>;
  raw: JsonObject;
}

export interface ConfigGraph {
  /** Every resource configuration address declared (data sources as `data.…`). */
  resources: ReadonlySet<string>;
  /** resource → the resources it reads (upstream), direct edges only. */
  upstream: ReadonlyMap<string, ReadonlySet<string>>;
  /** Root output name → the resources its value reads. */
  outputs: ReadonlyMap<string, ReadonlySet<string>>;
}

function obj(v: JsonValue | undefined): JsonObject {
  return isJsonObject(v) ? v : {};
}

function prefixOf(path: readonly string[]): string {
  return path.map((p) => `module.${p}.`).join('');
}

function loadModule(raw: JsonObject, path: string[], into: Map<string, ModuleConfig>): void {
  const mod: ModuleConfig = {
    path,
    resources: new Map(),
    calls: new Map(),
    outputs: new Map(),
    raw,
  };
  for (const r of Array.isArray(raw.resources) ? raw.resources : []) {
    if (isJsonObject(r) && typeof r.address === 'string') mod.resources.set(r.address, r);
  }
  for (const [name, call] of Object.entries(obj(raw.module_calls))) {
    if (!isJsonObject(call)) continue;
    mod.calls.set(name, call);
    loadModule(obj(call.module), [...path, name], into);
  }
  for (const [name, out] of Object.entries(obj(raw.outputs))) {
    if (isJsonObject(out)) mod.outputs.set(name, out);
  }
  into.set(path.join('.'), mod);
}

/** Every `references` list anywhere below `value` (expressions nest in blocks). */
function referencesIn(value: JsonValue | undefined, out: string[] = []): string[] {
  if (Array.isArray(value)) {
    for (const v of value) referencesIn(v, out);
  } else if (isJsonObject(value)) {
    for (const [k, v] of Object.entries(value)) {
      if (k === 'references' && Array.isArray(v)) {
        for (const r of v) if (typeof r === 'string') out.push(r);
      } else {
        referencesIn(v, out);
      }
    }
  }
  return out;
}

/** The references of a resource block: arguments, meta-arguments, provisioners. */
function resourceReferences(r: JsonObject): string[] {
  const refs = referencesIn(r.expressions);
  referencesIn(r.count_expression, refs);
  referencesIn(r.for_each_expression, refs);
  referencesIn(r.provisioners, refs);
  for (const d of Array.isArray(r.depends_on) ? r.depends_on : []) {
    if (typeof d === 'string') refs.push(d);
  }
  return refs;
}

// `module.web`, `module.web[0]`, `module.web["k"]` followed by `.output` or nothing.
const MODULE_REF = /^module\.([^.[\s]+)(?:\[[^\]]*\])*(?:\.([^.[\s]+))?/;
const IGNORED_ROOTS = new Set(['count', 'each', 'path', 'terraform', 'self']);

export function buildConfigGraph(
  configuration: JsonObject,
  locals: LocalsLookup,
  stateDependencies: ReadonlyMap<string, readonly string[]> = new Map(),
): ConfigGraph {
  const modules = new Map<string, ModuleConfig>();
  loadModule(obj(configuration.root_module), [], modules);

  const resources = new Set<string>();
  for (const mod of modules.values()) {
    for (const address of mod.resources.keys()) resources.add(prefixOf(mod.path) + address);
  }

  const memo = new Map<string, Set<string>>();
  const resolving = new Set<string>();

  /** The resources (config addresses) a reference made in module `path` reads. */
  const resolve = (ref: string, path: string[]): Set<string> => {
    const key = `${path.join('.')}|${ref}`;
    const known = memo.get(key);
    if (known) return known;
    if (resolving.has(key)) return new Set(); // a cycle; terraform would refuse it anyway
    resolving.add(key);
    const found = new Set<string>();
    const add = (set: Iterable<string>) => {
      for (const s of set) found.add(s);
    };
    const mod = modules.get(path.join('.'));
    const parts = ref.split('.');
    const root = parts[0].replace(/\[.*$/, '');
    if (mod && !IGNORED_ROOTS.has(root)) {
      if (root === 'var') {
        const name = parts[1]?.replace(/\[.*$/, '');
        if (path.length > 0 && name) {
          const parentPath = path.slice(0, -1);
          const call = modules.get(parentPath.join('.'))?.calls.get(path[path.length - 1]);
          const arg = call ? obj(call.expressions)[name] : undefined;
          for (const r of referencesIn(arg)) add(resolve(r, parentPath));
        }
      } else if (root === 'local') {
        const name = parts[1]?.replace(/\[.*$/, '');
        const table = locals(path);
        if (table === undefined) {
          const prefix = prefixOf(path);
          add([...resources].filter((r) => r.startsWith(prefix)));
        } else if (name) {
          for (const r of table.get(name) ?? []) add(resolve(r, path));
        }
      } else if (root === 'module') {
        const m = MODULE_REF.exec(ref);
        const callName = m?.[1];
        if (callName && mod.calls.has(callName)) {
          const childPath = [...path, callName];
          const child = modules.get(childPath.join('.'));
          const names = m[2] ? [m[2]] : [...(child?.outputs.keys() ?? [])];
          for (const n of names) {
            for (const r of referencesIn(child?.outputs.get(n)?.expression)) {
              add(resolve(r, childPath));
            }
          }
        }
      } else {
        const local =
          root === 'data' && parts.length >= 3
            ? `data.${parts[1]}.${parts[2].replace(/\[.*$/, '')}`
            : parts.length >= 2
              ? `${root}.${parts[1].replace(/\[.*$/, '')}`
              : null;
        if (local !== null && mod.resources.has(local)) found.add(prefixOf(path) + local);
      }
    }
    resolving.delete(key);
    memo.set(key, found);
    return found;
  };

  const upstream = new Map<string, Set<string>>();
  const edge = (from: string, to: string) => {
    if (from === to) return;
    let set = upstream.get(from);
    if (!set) upstream.set(from, (set = new Set()));
    set.add(to);
  };

  for (const mod of modules.values()) {
    // A module call's depends_on applies to everything inside the module.
    const inherited: string[] = [];
    for (let i = mod.path.length; i > 0; i--) {
      const parentPath = mod.path.slice(0, i - 1);
      const call = modules.get(parentPath.join('.'))?.calls.get(mod.path[i - 1]);
      for (const d of Array.isArray(call?.depends_on) ? call.depends_on : []) {
        if (typeof d === 'string') for (const r of resolve(d, parentPath)) inherited.push(r);
      }
    }
    for (const [address, r] of mod.resources) {
      const from = prefixOf(mod.path) + address;
      for (const ref of resourceReferences(r)) {
        for (const to of resolve(ref, mod.path)) edge(from, to);
      }
      for (const to of inherited) edge(from, to);
    }
  }
  for (const [from, deps] of stateDependencies) {
    for (const to of deps) edge(from, to);
  }

  const outputs = new Map<string, Set<string>>();
  const root = modules.get('')!;
  for (const [name, out] of root.outputs) {
    const reads = new Set<string>();
    for (const ref of referencesIn(out.expression)) for (const r of resolve(ref, [])) reads.add(r);
    for (const d of Array.isArray(out.depends_on) ? out.depends_on : []) {
      if (typeof d === 'string') for (const r of resolve(d, [])) reads.add(r);
    }
    outputs.set(name, reads);
  }
  return { resources, upstream, outputs };
}

/** Everything reachable from `start` along `edges` (start nodes excluded unless reached again). */
function reach(start: Iterable<string>, edges: ReadonlyMap<string, ReadonlySet<string>>) {
  const seen = new Set<string>();
  const queue = [...start];
  while (queue.length > 0) {
    const node = queue.pop()!;
    for (const next of edges.get(node) ?? []) {
      if (!seen.has(next)) {
        seen.add(next);
        queue.push(next);
      }
    }
  }
  return seen;
}

function downstreamEdges(graph: ConfigGraph): Map<string, Set<string>> {
  const downstream = new Map<string, Set<string>>();
  for (const [from, tos] of graph.upstream) {
    for (const to of tos) {
      let set = downstream.get(to);
      if (!set) downstream.set(to, (set = new Set()));
      set.add(from);
    }
  }
  return downstream;
}

/** Everything that reads `written`, transitively. */
export function downstreamClosure(graph: ConfigGraph, written: Iterable<string>): Set<string> {
  return reach(written, downstreamEdges(graph));
}

/**
 * The resources a change to `written` must be isolated from: everything they
 * read, transitively (upstream), and everything that reads them,
 * transitively (downstream). The two directions are not mixed: a sibling that
 * only shares an upstream resource is not included, so two modules reading
 * the same network can be applied in parallel.
 */
export function dependencyClosure(graph: ConfigGraph, written: Iterable<string>): Set<string> {
  const start = [...written];
  const out = reach(start, graph.upstream);
  for (const r of downstreamClosure(graph, start)) out.add(r);
  return out;
}

/** Root outputs that read any of `resources`. */
export function outputsReading(graph: ConfigGraph, touched: ReadonlySet<string>): string[] {
  const out: string[] = [];
  for (const [name, reads] of graph.outputs) {
    if ([...reads].some((r) => touched.has(r))) out.push(name);
  }
  return out.sort();
}
