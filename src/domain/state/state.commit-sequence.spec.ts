import { fuzzSeeds, random, seedRange, withSeed } from '../../../test/support/seeded-random';
import { CommandContext } from '../shared/event';
import { parseStateDocument } from '../terraform/parse-state-document';
import { InstanceObjectV4, StateDocumentV4 } from '../terraform/state-document';
import { FlatInstance, flattenInstances, KnownFlatInstance } from '../terraform/state-instances';
import { CommitState } from './state.commands';
import { decide, evolve, initialState } from './state.decider';
import { resourceAddressOf, resourceFields } from './state.evolve';
import { ActiveState, ResourceEntry, StateAggregate } from './state.model';
import { fromSnapshot, toSnapshot } from './state.snapshot';

/**
 * The commit path costs what a commit changes: flattening answers shared
 * instance objects by identity, the diff walks the current instances only
 * when some are gone, and evolve copies layered maps. Here random sequences
 * of commits (adds, removes, changes, moves between resources, dependency
 * changes, provider changes, outputs) go through it, the next document
 * sharing the unchanged instance objects as the reusing parse does, and
 * after each commit everything is checked against the whole computation:
 * the diff as sets, the aggregate's maps as a plain-Map evolve (copy per
 * commit, then apply) would hold them, order included, and a snapshot round
 * trip of the state.
 */
const ctx: CommandContext = { actor: 'a', correlationId: 'c', now: '2026-12-01T00:00:00.000Z' };
const PROVIDERS = [
  'provider["registry.terraform.io/hashicorp/aws"]',
  'provider["example.com/x/y"]',
];

interface Model {
  serial: number;
  /** resource name → provider index and instances (key → object) */
  resources: Map<string, { provider: number; instances: Map<number, InstanceObjectV4> }>;
  outputs: Record<string, { value: number; type: string }>;
}

function object(r: () => number, key: number, names: string[]): InstanceObjectV4 {
  const deps = names.filter(() => r() < 0.2).map((n) => `terraform_data.${n}`);
  return {
    index_key: key,
    schema_version: 0,
    attributes: { id: `${key}-${Math.floor(r() * 1e6)}`, n: Math.floor(r() * 4) },
    sensitive_attributes: [],
    ...(deps.length > 0 ? { dependencies: deps } : {}),
  };
}

function documentOf(m: Model): StateDocumentV4 {
  return {
    version: 4,
    terraform_version: '1.11.4',
    serial: m.serial,
    lineage: 'l',
    outputs: m.outputs,
    resources: [...m.resources]
      .filter(([, res]) => res.instances.size > 0)
      .map(([name, res]) => ({
        mode: 'managed' as const,
        type: 'terraform_data',
        name,
        provider: PROVIDERS[res.provider],
        each: 'list' as const,
        instances: [...res.instances.values()],
      })),
    check_results: null,
  };
}

function edit(r: () => number, m: Model): void {
  const names = [...m.resources.keys()];
  const edits = 1 + Math.floor(r() * (r() < 0.1 ? 40 : 6));
  for (let e = 0; e < edits; e++) {
    const name = names[Math.floor(r() * names.length)];
    const res = m.resources.get(name)!;
    const keys = [...res.instances.keys()];
    const key = keys[Math.floor(r() * keys.length)];
    const roll = r();
    if (roll < 0.25 || key === undefined) {
      const k = keys.length === 0 ? 0 : Math.max(...keys) + 1;
      res.instances.set(k, object(r, k, names));
    } else if (roll < 0.45) {
      res.instances.delete(key);
    } else if (roll < 0.65) {
      res.instances.set(key, object(r, key, names));
    } else if (roll < 0.75) {
      // The same object (same bytes) moved to another resource.
      const to = m.resources.get(names[Math.floor(r() * names.length)])!;
      if (to !== res && !to.instances.has(key)) {
        to.instances.set(key, res.instances.get(key)!);
        res.instances.delete(key);
      }
    } else if (roll < 0.85) {
      const o = res.instances.get(key)!;
      res.instances.set(key, { ...o, dependencies: [`terraform_data.${names[0]}`] });
    } else if (roll < 0.9) {
      res.provider = 1 - res.provider;
    } else {
      m.outputs[`o${Math.floor(r() * 3)}`] = { value: Math.floor(r() * 10), type: 'number' };
    }
  }
}

/** What the reusing parse hands over: the previous document's objects where the bytes are equal. */
function sharing(doc: StateDocumentV4, previous: StateDocumentV4 | null): StateDocumentV4 {
  const before = new Map<string, InstanceObjectV4>();
  for (const o of previous?.resources.flatMap((r) => r.instances) ?? []) {
    before.set(JSON.stringify(o), o);
  }
  return {
    ...doc,
    resources: doc.resources.map((res) => ({
      ...res,
      instances: res.instances.map((o) => before.get(JSON.stringify(o)) ?? o),
    })),
  };
}

function fullDiff(current: ReadonlyMap<string, string>, next: readonly FlatInstance[]) {
  const nextHashes = new Map(next.map((i) => [i.address, i.hash]));
  return {
    opened: next.filter((i) => current.get(i.address) !== i.hash).map((i) => i.address),
    closed: [...current].filter(([a, h]) => nextHashes.get(a) !== h).map(([a]) => a),
  };
}

/** The aggregate's maps as evolve kept them with a plain Map copied per commit. */
interface Reference {
  instances: Map<string, string>;
  changedIn: Map<string, number>;
  resources: Map<string, ResourceEntry>;
}

describe('the State commit path over random commit sequences', () => {
  it('decides and evolves exactly what the whole computation does', () => {
    for (const seed of fuzzSeeds(seedRange(1, 25))) {
      withSeed(seed, () => {
        const r = random(seed);
        const m: Model = { serial: 0, resources: new Map(), outputs: {} };
        for (const name of ['a', 'b', 'c', 'd']) {
          const instances = new Map<number, InstanceObjectV4>();
          const count = Math.floor(r() * 30);
          for (let k = 0; k < count; k++) instances.set(k, object(r, k, ['a', 'b', 'c', 'd']));
          m.resources.set(name, { provider: 0, instances });
        }
        let state: StateAggregate = initialState();
        const ref: Reference = { instances: new Map(), changedIn: new Map(), resources: new Map() };
        const flats = new WeakMap<InstanceObjectV4, FlatInstance>();
        const known: KnownFlatInstance = (o) => flats.get(o);
        let previous: StateDocumentV4 | null = null;
        let reusedTotal = 0;
        const pending: { state: StateAggregate; json: string; due: number }[] = [];
        let laterSnapshots = 0;
        for (let v = 1; v <= 30; v++) {
          m.serial = v;
          if (v > 1) edit(r, m);
          const doc = sharing(parseStateDocument(JSON.stringify(documentOf(m))), previous);
          const instances = flattenInstances(doc, undefined, known);
          expect(instances).toEqual(flattenInstances(doc));
          reusedTotal += instances.filter((i) => flats.get(i.instance) === i).length;
          for (const i of instances) flats.set(i.instance, i);

          const before = state.status === 'active' ? state.instances : new Map<string, string>();
          const command: CommitState = {
            type: 'CommitState',
            data: {
              name: 's',
              newStateId: 'id',
              document: doc,
              instances,
              source: 'http',
              checksum: `c${v}`,
            },
            metadata: ctx,
          };
          const events = decide(command, state);
          const opened = events.flatMap((e) => (e.type === 'LifecycleOpened' ? [e.data] : []));
          const closed = events.flatMap((e) => (e.type === 'LifecycleClosed' ? [e.data] : []));
          const expected = fullDiff(before, instances);
          expect(opened.map((o) => o.address)).toEqual(expected.opened);
          expect(closed.map((c) => c.address).sort()).toEqual([...expected.closed].sort());
          for (const c of closed) expect(c.hash).toBe(before.get(c.address));

          // The plain-Map evolve: copy, then apply the commit's lifecycle events.
          ref.instances = new Map(ref.instances);
          ref.changedIn = new Map(ref.changedIn);
          ref.resources = new Map(ref.resources);
          for (const e of events) {
            if (e.type === 'LifecycleClosed') {
              ref.changedIn.set(e.data.address, v);
              if (ref.instances.delete(e.data.address)) {
                const at = e.data.address.replace(/\[\d+\]$/, '');
                const entry = ref.resources.get(at)!;
                if (entry.instances === 1) ref.resources.delete(at);
                else ref.resources.set(at, { ...entry, instances: entry.instances - 1 });
              }
            } else if (e.type === 'LifecycleOpened') {
              const { address, hash, resource, instance } = e.data;
              const replaced = ref.instances.has(address);
              ref.instances.set(address, hash);
              ref.changedIn.set(address, v);
              if (!replaced) {
                const at = resourceAddressOf(address, instance.index_key, instance.deposed);
                const entry = ref.resources.get(at);
                ref.resources.set(at, {
                  fields: resourceFields(resource),
                  instances: (entry?.instances ?? 0) + 1,
                });
              }
            }
          }
          const older = state;
          const olderSeen = older.status === 'active' ? [...older.instances] : [];
          state = events.reduce(evolve, state);
          // AggregateStore writes a snapshot after the command answered, while
          // later commits evolve on: a state's snapshot taken three commits
          // later must be the one taken at once.
          if (v % 5 === 0)
            pending.push({ state, json: JSON.stringify(toSnapshot(state)), due: v + 3 });
          for (const p of pending.filter((p) => p.due === v)) {
            expect(JSON.stringify(toSnapshot(p.state))).toBe(p.json);
            laterSnapshots++;
          }
          if (v % 7 === 0) state = fromSnapshot(JSON.parse(JSON.stringify(toSnapshot(state))));
          const active = state as ActiveState;
          expect(active.version).toBe(v);
          expect([...active.instances]).toEqual([...ref.instances]);
          expect([...active.changedIn]).toEqual([...ref.changedIn]);
          expect([...active.resources]).toEqual([...ref.resources]);
          expect(active.instances.size).toBe(instances.length);
          expect(new Map(active.instances)).toEqual(
            new Map(instances.map((i) => [i.address, i.hash])),
          );
          // The state before the commit did not see it.
          if (older.status === 'active') expect([...older.instances]).toEqual(olderSeen);
          previous = doc;
        }
        // The sequences really shared objects, so the identity path was taken.
        expect(reusedTotal).toBeGreaterThan(100);
        expect(laterSnapshots).toBe(5);
      });
    }
  });
});
