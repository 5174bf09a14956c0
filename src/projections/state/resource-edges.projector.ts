import type { RecordedEvent } from '../../domain/shared/event';
import { StateEventType } from '../../domain/state';
import type { Queryable } from '../../infrastructure/postgres/database';
import { jsonbText, textParam } from '../../infrastructure/postgres/jsonb-text';
import { copyField, copyRows } from '../../infrastructure/postgres/copy-rows';
import { Projector } from '../projector';
import { ResourceAddresses } from './lifecycle-row';
import { asStateEvent } from './state-event';

/** A `resource_edge_sources` row: what an address's newest lifecycle declares. */
interface Source {
  state_id: string;
  address: string;
  version: number;
  from_resource_address: string;
  /** null once the address is closed. */
  dependencies: string[] | null;
}

type Change =
  | { kind: 'close'; state_id: string; address: string; version: number }
  | {
      kind: 'open';
      state_id: string;
      address: string;
      version: number;
      from: string;
      dependencies: string[];
    };

const key = (stateId: string, address: string) => `${stateId}\u0000${address}`;

/** The map `outer` holds under `key`, made empty if none. */
function inner<K, V>(outer: Map<string, Map<K, V>>, key: string): Map<K, V> {
  let map = outer.get(key);
  if (map === undefined) outer.set(key, (map = new Map()));
  return map;
}

// Sources written in one batch from which COPY pays (a first commit's).
const COPY_ROWS = 500;

/**
 * An instance's dependencies as stored: each once, in code-unit order.
 * Terraform writes them that way already, so a list found in order is taken
 * as it is (a first commit has 20,000 of them), and only another is sorted.
 */
function sortedTargets(dependencies: readonly string[]): string[] {
  const targets = dependencies.map((to) => textParam(to));
  for (let i = 1; i < targets.length; i++) {
    if (!(targets[i - 1] < targets[i])) return [...new Set(targets)].sort();
  }
  return targets;
}

/** A text[] literal: every element quoted, its quotes and backslashes escaped. */
function textArrayLiteral(items: readonly string[]): string {
  return `{${items.map(quotedElement).join(',')}}`;
}

const ELEMENT_ESCAPED = /["\\]/g;

function quotedElement(text: string): string {
  // Addresses rarely hold either character: most need no pass of the pattern.
  const plain = !text.includes('"') && !text.includes('\\');
  return `"${plain ? text : text.replace(ELEMENT_ESCAPED, '\\$&')}"`;
}

/**
 * `resource_edges`: the live dependency edges between resource addresses,
 * each counting the instances that declare it, so that a walk over the
 * graph (scope expansion, blast radius) reads a row per resource, not per
 * instance. A LifecycleClosed names only its address, so what each live
 * address declares is kept in `resource_edge_sources`.
 *
 * A batch reads the sources of the addresses it touches, replays its events
 * over them in memory and writes the sources it changed and each edge's net
 * count change. Idempotent: an open applies only over an older lifecycle (or
 * an address closed at or before its version), a close only to a live
 * lifecycle older than it, so a redelivered event changes nothing.
 */
@Projector()
export class ResourceEdgesProjector implements Projector {
  readonly name = 'state-resource-edges';
  readonly handles = [StateEventType.LifecycleOpened, StateEventType.LifecycleClosed];
  readonly tables = ['resource_edges', 'resource_edge_sources'];

  private readonly addresses = new ResourceAddresses();

  async apply(events: RecordedEvent[], tx: Queryable): Promise<void> {
    const changes: Change[] = [];
    for (const recorded of events) {
      const event = asStateEvent(recorded);
      if (event === null) continue;
      if (event.type === 'LifecycleClosed') {
        const d = event.data;
        changes.push({
          kind: 'close',
          state_id: d.stateId,
          address: textParam(d.address),
          version: d.version,
        });
      } else if (event.type === 'LifecycleOpened') {
        const d = event.data;
        changes.push({
          kind: 'open',
          state_id: d.stateId,
          address: textParam(d.address),
          version: d.version,
          from: textParam(this.addresses.of(d.resource)),
          dependencies: sortedTargets(d.instance.dependencies ?? []),
        });
      }
    }
    if (changes.length === 0) return;

    const sources = await this.sources(tx, changes);
    const stored = sources.size;
    // Each address's source is one object for the whole batch, changed in
    // place: `changed` holds the objects to write, and no key joining the
    // state and the address is built and hashed per change (20,000 for a
    // first commit).
    const changed = new Set<Source>();
    // Net count changes by source resource, then by target: a first commit
    // counts 60,000 edges, and a key joining the three texts was a long
    // string built and hashed for each.
    type Count = { state_id: string; from: string; to: string; n: number };
    const counts = new Map<string, Map<string, Map<string, Count>>>();
    const count = (stateId: string, from: string, deps: string[], n: number) => {
      const byTarget = inner(inner(counts, stateId), from);
      for (const to of deps) {
        const c = byTarget.get(to);
        if (c) c.n += n;
        else byTarget.set(to, { state_id: stateId, from, to, n });
      }
    };
    for (const c of changes) {
      const ofState = inner(sources, c.state_id);
      const was = ofState.get(c.address);
      if (c.kind === 'close') {
        if (was === undefined || was.dependencies === null || was.version >= c.version) continue;
        count(c.state_id, was.from_resource_address, was.dependencies, -1);
        was.version = c.version;
        was.dependencies = null;
        changed.add(was);
        continue;
      }
      if (was !== undefined) {
        const live = was.dependencies !== null;
        if (live ? was.version >= c.version : was.version > c.version) continue;
        if (was.dependencies !== null)
          count(c.state_id, was.from_resource_address, was.dependencies, -1);
        was.version = c.version;
        was.from_resource_address = c.from;
        was.dependencies = c.dependencies;
        changed.add(was);
      } else {
        if (c.dependencies.length === 0) continue; // nothing to remember
        const source: Source = {
          state_id: c.state_id,
          address: c.address,
          version: c.version,
          from_resource_address: c.from,
          dependencies: c.dependencies,
        };
        ofState.set(c.address, source);
        changed.add(source);
      }
      count(c.state_id, c.from, c.dependencies, 1);
    }

    if (changed.size >= COPY_ROWS && stored === 0) {
      // None of these addresses has a row (read under this projector's
      // lock): a first commit's sources are all new, so they are streamed
      // with COPY instead of planned and decoded as one big recordset.
      await copyRows(
        tx,
        'resource_edge_sources',
        ['state_id', 'address', 'version', 'from_resource_address', 'dependencies'],
        (function* () {
          for (const s of changed) {
            yield [
              s.state_id,
              copyField(s.address),
              String(s.version),
              copyField(s.from_resource_address),
              copyField(s.dependencies === null ? null : textArrayLiteral(s.dependencies)),
            ];
          }
        })(),
      );
    } else if (changed.size > 0) {
      await tx.query(
        `INSERT INTO resource_edge_sources
                (state_id, address, version, from_resource_address, dependencies)
         SELECT state_id, address, version, from_resource_address, dependencies
           FROM jsonb_to_recordset($1::jsonb) AS s(state_id uuid, address text, version integer,
                from_resource_address text, dependencies text[])
         ON CONFLICT (state_id, address) DO UPDATE
            SET version = excluded.version,
                from_resource_address = excluded.from_resource_address,
                dependencies = excluded.dependencies`,
        [jsonbText([...changed])],
      );
    }
    const net = [...counts.values()].flatMap((byFrom) =>
      [...byFrom.values()].flatMap((byTarget) => [...byTarget.values()].filter((c) => c.n !== 0)),
    );
    if (net.length === 0) return;
    const params = [jsonbText(net)];
    const recordset = `jsonb_to_recordset($1::jsonb) AS c(state_id uuid, "from" text, "to" text, n integer)`;
    await tx.query(
      `INSERT INTO resource_edges (state_id, from_resource_address, to_address, instances)
       SELECT state_id, "from", "to", n FROM ${recordset}
       ON CONFLICT (state_id, from_resource_address, to_address) DO UPDATE
          SET instances = resource_edges.instances + excluded.instances`,
      params,
    );
    // An edge no live instance declares any more is gone.
    await tx.query(
      `DELETE FROM resource_edges e USING ${recordset}
        WHERE e.state_id = c.state_id AND e.from_resource_address = c."from"
          AND e.to_address = c."to" AND e.instances <= 0`,
      params,
    );
  }

  /**
   * The stored sources of the addresses `changes` touch, by state and address. A big batch first
   * asks whether its states have any source at all: a first commit's do not,
   * and looking its 20,000 addresses up one by one cost both sides more than
   * the question.
   */
  private async sources(
    tx: Queryable,
    changes: Change[],
  ): Promise<Map<string, Map<string, Source>>> {
    if (changes.length >= COPY_ROWS) {
      const states = [...new Set(changes.map((c) => c.state_id))];
      const { rows } = await tx.query(
        `SELECT 1 FROM resource_edge_sources WHERE state_id = ANY($1::uuid[]) LIMIT 1`,
        [states],
      );
      if (rows.length === 0) return new Map();
    }
    const wanted = [...new Map(changes.map((c) => [key(c.state_id, c.address), c])).values()];
    const { rows } = await tx.query<Source>(
      `SELECT s.state_id, s.address, s.version, s.from_resource_address, s.dependencies
         FROM unnest($1::uuid[], $2::text[]) AS w(state_id, address)
         JOIN resource_edge_sources s ON s.state_id = w.state_id AND s.address = w.address`,
      [wanted.map((c) => c.state_id), wanted.map((c) => c.address)],
    );
    const sources = new Map<string, Map<string, Source>>();
    for (const r of rows) inner(sources, r.state_id).set(r.address, r);
    return sources;
  }
}
