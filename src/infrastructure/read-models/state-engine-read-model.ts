import { DomainError } from '../../domain/shared/domain-error';
import {
  Candidate,
  candidateCovers,
  expandScope,
  parsedAddress,
  RealizedInstance,
  ScopeAnswer,
} from '../../domain/state-engine/scope';
import { formatIndexKey, InstanceAddress } from '../../domain/terraform/instance-address';
import {
  buildDocument,
  InstanceObjectV4,
  JsonObject,
  ResourceDescriptor,
  ResourceMode,
  StateDocumentV4,
} from '../../domain/terraform';
import { mapInTurns } from '../../application/in-turns';
import { Turnstile } from '../../application/turnstile';
import { SLICE_PAGING, SliceRowKey, SlicePaging, sliceText } from './slice-text';
import { descriptorOf } from './resource-descriptor-row';
import { DocumentMetaColumns, documentMetaOf } from './document-meta-row';
import type { Database, Queryable } from '../postgres/database';

/** Up to this many whole-resource candidates are looked up each in a branch of its own. */
export const SEPARATE_RESOURCE_LOOKUPS = 200;

/**
 * How many slices read their rows at once. A slice's rows (without their
 * objects, read later a page at a time) are the keys of up to the whole
 * state: ten 20,000-instance slices reading theirs at once made kld's heap
 * grow by all ten at the same moment.
 */
const SLICE_READS_AT_ONCE = 2;

/** How many dependency levels a scope expansion follows at most. */
const MAX_WALK_DEPTH = 64;

/** The header of a state as the state-engine lane reports it. */
export interface EngineStateHead {
  stateId: string;
  name: string;
  version: number;
  serial: number;
  lineage: string;
  terraformVersion: string;
  instanceCount: number;
  resourceCount: number;
}

export interface Slice {
  head: EngineStateHead;
  /** The version the slice was read at (the current one unless asked otherwise). */
  version: number;
  serial: number;
  /** How many instances the slice holds. */
  instanceCount: number;
  /**
   * A terraform state document (version 4) holding only the slice, and
   * every output: its text in pieces, each page of instances read from
   * PostgreSQL as the piece before is taken (slice-text.ts). Each call reads
   * it again, the same text.
   */
  text(): AsyncGenerator<string>;
}

interface HeadRow {
  state_id: string;
  name: string;
  current_version: number;
  current_serial: string | null;
  lineage: string | null;
  terraform_version: string | null;
  instance_count: number;
  resource_count: number;
}

interface SliceRow {
  address: string;
  create_version: number;
  module_path: string;
  mode: ResourceMode;
  type: string;
  name: string;
  provider: string;
  each_mode: 'list' | 'map' | null;
  resource_extra: JsonObject | null;
  stored: number;
}

interface VersionRow extends DocumentMetaColumns {
  version: number;
}

/**
 * The prefilter for candidates: `columns` of the rows of the named
 * resources (type and name, and the instance key when the candidate names
 * one: module keys are left to the matcher), of the selected types, or
 * under the named top-level module calls, among the rows `rows` admits (a
 * condition on `r`). One branch per kind of candidate present, each index
 * lookups — (type, name, index_key), the module path and its
 * text_pattern_ops range — so a slice reads its own rows, not the state's;
 * the matcher decides. The branches are a UNION ALL (a row may come more
 * than once; `instance` is json, which has no equality for UNION). `params`
 * receives the branch parameters after the caller's.
 */
function prefiltered(
  candidates: Candidate[],
  columns: string,
  rows: string,
  params: unknown[],
): string {
  const whole = { types: [] as string[], names: [] as string[] };
  const keyed = { types: [] as string[], names: [] as string[], keys: [] as string[] };
  const selected = new Set<string>();
  const modules = new Set<string>();
  for (const c of candidates) {
    const r = c.glob.resource;
    if (r !== null && r.key !== undefined) {
      keyed.types.push(r.type);
      keyed.names.push(r.name);
      keyed.keys.push(formatIndexKey(r.key).slice(1, -1));
    } else if (r !== null) {
      whole.types.push(r.type);
      whole.names.push(r.name);
    } else if (c.type !== null && c.glob.modules.length === 0) selected.add(c.type);
    // A module prefix, or a selector under a module: read the module's rows.
    else modules.add(`module.${c.glob.modules[0].name}`);
  }
  const $ = (value: unknown) => {
    params.push(value);
    return `$${params.length}::text[]`;
  };
  const select = `SELECT ${columns} FROM resources r`;
  // One index lookup per candidate value: a LATERAL subquery per unnest
  // row, fenced by OFFSET 0 so the planner cannot flatten it into a join.
  // As a join it hashed the whole state whenever the statistics (absent
  // right after a big import, coarse for a handful of module paths or
  // resource names) made one value look like a third of the rows.
  const each = (values: string, names: string, match: string) =>
    `SELECT x.* FROM unnest(${values}) c(${names})
      CROSS JOIN LATERAL (${select} WHERE ${rows} AND ${match} OFFSET 0) x`;
  const branches: string[] = [];
  if (whole.types.length > 0 && whole.types.length <= SEPARATE_RESOURCE_LOOKUPS) {
    // One branch per resource with its own parameters: the planner sees each name, so a rare
    // name in a state where two names hold every row is an index lookup on (type, name). A
    // LATERAL parameter is unknown at planning: it took every name for a third of the table
    // and walked the whole `type` index per candidate (350 ms for a 7 KB slice at 100k).
    whole.types.forEach((type, i) => {
      params.push(type, whole.names[i]);
      branches.push(
        `${select} WHERE ${rows} AND r.type = $${params.length - 1}::text AND r.name = $${params.length}::text`,
      );
    });
  } else if (whole.types.length > 0) {
    branches.push(
      each(
        `${$(whole.types)}, ${$(whole.names)}`,
        'type, name',
        'r.type = c.type AND r.name = c.name',
      ),
    );
  }
  if (keyed.types.length > 0) {
    branches.push(
      each(
        `${$(keyed.types)}, ${$(keyed.names)}, ${$(keyed.keys)}`,
        'type, name, index_key',
        'r.type = c.type AND r.name = c.name AND r.index_key = c.index_key',
      ),
    );
  }
  if (selected.size > 0) {
    branches.push(each($([...selected]), 'type', 'r.type = c.type'));
  }
  if (modules.size > 0) {
    // The module itself, and every path under it: 'm.' ≤ p < 'm/' and
    // 'm[' ≤ p < 'm\' are exactly the paths starting 'm.' and 'm[' in the
    // byte order text_pattern_ops indexes (resources_module*, migration 016).
    const m = $([...modules]);
    branches.push(each(m, 'm', 'r.module_path = c.m'));
    for (const [from, to] of [
      ["'.'", "'/'"],
      ["'['", 'chr(92)'],
    ]) {
      branches.push(
        each(m, 'm', `r.module_path ~>=~ (c.m || ${from}) AND r.module_path ~<~ (c.m || ${to})`),
      );
    }
  }
  // No candidate: no row, with the caller's parameters still used (a statement
  // that names none of them is refused for the parameters it is sent).
  if (branches.length === 0) return `${select} WHERE ${rows} AND false`;
  return branches.join('\n    UNION ALL\n    ');
}

/**
 * Which candidates cover an address, without trying every candidate on
 * every row: resource candidates are looked up by resource and key.
 */
class CandidateMatcher {
  private readonly byResource = new Map<string, number[]>();
  private readonly open: number[] = [];

  constructor(private readonly candidates: Candidate[]) {
    candidates.forEach((c, i) => {
      const r = c.glob.resource;
      if (r === null) {
        this.open.push(i);
        return;
      }
      const k = CandidateMatcher.key(r.mode, r.type, r.name, r.key);
      const list = this.byResource.get(k);
      if (list) list.push(i);
      else this.byResource.set(k, [i]);
    });
  }

  private static key(mode: string, type: string, name: string, key?: number | string): string {
    return `${mode}\u0000${type}\u0000${name}\u0000${key === undefined ? '*' : formatIndexKey(key)}`;
  }

  /** Indexes of the candidates that cover the address. */
  matches(at: InstanceAddress): number[] {
    const out: number[] = [];
    const lists = [
      this.byResource.get(CandidateMatcher.key(at.mode, at.type, at.name)),
      at.key === undefined
        ? undefined
        : this.byResource.get(CandidateMatcher.key(at.mode, at.type, at.name, at.key)),
      this.open,
    ];
    for (const list of lists) {
      for (const i of list ?? []) if (candidateCovers(this.candidates[i], at)) out.push(i);
    }
    return out;
  }
}

/**
 * The slice's document with a stand-in for each instance object, which
 * orders it as the object does (its key, its deposed key), and the row each
 * stands for: the objects are read a page at a time as the text is written
 * (slice-text.ts). Made apart from the rows read, so that the text, kept
 * until its reader has it, holds only these.
 */
function skeletonOf(
  v: VersionRow,
  rows: readonly SliceRow[],
  covered: readonly (InstanceAddress | null)[],
): { skeleton: StateDocumentV4; keys: Map<InstanceObjectV4, SliceRowKey> } {
  const keys = new Map<InstanceObjectV4, SliceRowKey>();
  const placed: { resource: ResourceDescriptor; instance: InstanceObjectV4 }[] = [];
  rows.forEach((r, n) => {
    const at = covered[n];
    if (at === null) return;
    const stub = {
      ...(at.key === undefined ? {} : { index_key: at.key }),
      ...(at.deposed === undefined ? {} : { deposed: at.deposed }),
    } as InstanceObjectV4;
    keys.set(stub, { address: r.address, createVersion: r.create_version, stored: r.stored });
    placed.push({ resource: descriptorOf(r), instance: stub });
  });
  const skeleton = buildDocument(documentMetaOf(v), placed);
  return { skeleton, keys };
}

/**
 * What the state-engine lane reads (ADR 0029): state metadata, scope
 * expansion and slices, from the read models (resources, their lifecycles,
 * the resource-level dependency edges), never by parsing the trunk, so the
 * cost follows the slice. Each answer is read in one snapshot.
 */
export class StateEngineReadModel {
  private readonly sliceReads = new Turnstile(SLICE_READS_AT_ONCE);

  constructor(
    private readonly db: Database,
    private readonly paging: SlicePaging = SLICE_PAGING,
  ) {}

  async head(name: string, q: Queryable = this.db.pool): Promise<EngineStateHead | null> {
    const { rows } = await q.query<HeadRow>(
      `SELECT state_id, name, current_version, current_serial, lineage, terraform_version,
              instance_count, resource_count
         FROM states WHERE name = $1 AND deleted_at IS NULL`,
      [name],
    );
    if (rows.length === 0) return null;
    const r = rows[0];
    if (r.current_version === 0 || r.current_serial === null || r.lineage === null) {
      throw new DomainError(
        'APPLY.NO_VERSION',
        `state ${name} has no version yet: write its first version with terraform`,
      );
    }
    return {
      stateId: r.state_id,
      name: r.name,
      version: r.current_version,
      serial: Number(r.current_serial),
      lineage: r.lineage,
      terraformVersion: r.terraform_version ?? '',
      instanceCount: r.instance_count,
      resourceCount: r.resource_count,
    };
  }

  async expand(
    name: string,
    candidates: Candidate[],
  ): Promise<ScopeAnswer & { head: EngineStateHead }> {
    return this.snapshot((q) => this.expandIn(q, name, candidates));
  }

  /**
   * A scope expansion and, only when it proves the scope safe, the slice of
   * the same candidates, both read in one snapshot: the slice is of the
   * version the proof was made on, and a client that asks for both waits for
   * one exchange instead of two (docs/state-engine.md, "Scope expansion").
   */
  async expandWithSlice(
    name: string,
    candidates: Candidate[],
  ): Promise<ScopeAnswer & { head: EngineStateHead; slice: Slice | null }> {
    return this.sliceReads.through(() =>
      this.snapshot(async (q) => {
        const answer = await this.expandIn(q, name, candidates);
        const slice = answer.provably_safe
          ? await this.sliceIn(q, answer.head, candidates, answer.head.version)
          : null;
        return { ...answer, slice };
      }),
    );
  }

  private async expandIn(
    q: Queryable,
    name: string,
    candidates: Candidate[],
  ): Promise<ScopeAnswer & { head: EngineStateHead }> {
    const head = await this.requireHead(name, q);
    const params: unknown[] = [head.stateId];
    const candidateRows = prefiltered(
      candidates,
      'r.address, r.resource_address, r.delete_version IS NULL AS live',
      'r.state_id = $1',
      params,
    );
    const { rows } = await q.query<{ address: string; resource_address: string; live: boolean }>(
      `SELECT DISTINCT address, resource_address, live FROM (${candidateRows}) c`,
      params,
    );
    const matcher = new CandidateMatcher(candidates);
    const matched: RealizedInstance[][] = candidates.map(() => []);
    const seenBefore = new Set<number>();
    // Rows are distinct (address, live) pairs: a live address comes once. Matched
    // in turns: the 20,000 addresses of a big scope, parsed at once, held kld's thread.
    const matches = await mapInTurns(rows, (row) => matcher.matches(parsedAddress(row.address)));
    rows.forEach((row, n) => {
      for (const i of matches[n]) {
        if (row.live) {
          matched[i].push({ address: row.address, resourceAddress: row.resource_address });
        } else seenBefore.add(i);
      }
    });
    const inScope = [...new Set(matched.flat().map((m) => m.resourceAddress))];
    const dependencies = await this.walk(q, head.stateId, inScope, 'up');
    const dependents = await this.walk(q, head.stateId, inScope, 'down');
    const named = [...new Set(dependencies.map((d) => d.address))];
    // One index probe per named resource: DISTINCT over the rows read every instance of a
    // resource with thousands of them.
    const { rows: realizedRows } = await q.query<{ resource_address: string }>(
      `SELECT n.resource_address FROM unnest($2::text[]) AS n(resource_address)
        WHERE EXISTS (SELECT 1 FROM resources r
                       WHERE r.state_id = $1 AND r.delete_version IS NULL
                         AND r.resource_address = n.resource_address)`,
      [head.stateId, named],
    );
    const answer = expandScope({
      candidates,
      matched,
      seenBefore,
      dependencies,
      dependents,
      realized: new Set(realizedRows.map((r) => r.resource_address)),
    });
    return { ...answer, head };
  }

  /**
   * The transitive dependency closure of `from` (resource addresses) over
   * the live edges, upstream (what they depend on) or downstream (who
   * depends on them), each address with its depth and the least resource it
   * was reached from, nearest first. Breadth first over `resource_edges`
   * (one row per pair of resources, however many instances declare it),
   * one index lookup per level: a recursive CTE joined the whole edge
   * table at every level, and the instance edges of a resource that
   * thousands of instances depend on were read one by one.
   */
  private async walk(
    q: Queryable,
    stateId: string,
    from: string[],
    direction: 'up' | 'down',
  ): Promise<{ address: string; via: string }[]> {
    const [next, prev] =
      direction === 'up'
        ? ['to_address', 'from_resource_address']
        : ['from_resource_address', 'to_address'];
    const reached = new Map<string, { via: string; depth: number }>();
    const expanded = new Set(from);
    let frontier = [...expanded];
    for (let depth = 1; depth <= MAX_WALK_DEPTH && frontier.length > 0; depth++) {
      const { rows } = await q.query<{ address: string; via: string }>(
        `SELECT e.${next} AS address, e.${prev} AS via FROM resource_edges e
          WHERE e.state_id = $1 AND e.${prev} = ANY($2::text[])`,
        [stateId, frontier],
      );
      frontier = [];
      for (const { address, via } of rows) {
        const seen = reached.get(address);
        if (seen === undefined) reached.set(address, { via, depth });
        else if (via < seen.via) seen.via = via;
        if (!expanded.has(address)) {
          expanded.add(address);
          frontier.push(address);
        }
      }
    }
    return [...reached]
      .sort(([a, x], [b, y]) => x.depth - y.depth || (a < b ? -1 : a > b ? 1 : 0))
      .map(([address, { via }]) => ({ address, via }));
  }

  /**
   * A slice: the instances the candidates cover at `version` (the current
   * one by default), with every output of that version, as a document
   * carrying the trunk's lineage and that version's serial.
   */
  async slice(name: string, candidates: Candidate[], version?: number): Promise<Slice> {
    return this.sliceReads.through(() =>
      this.snapshot(async (q) =>
        this.sliceIn(q, await this.requireHead(name, q), candidates, version),
      ),
    );
  }

  private async sliceIn(
    q: Queryable,
    head: EngineStateHead,
    candidates: Candidate[],
    version?: number,
  ): Promise<Slice> {
    const at = version ?? head.version;
    const { rows: versions } = await q.query<VersionRow>(
      `SELECT version, serial, lineage, terraform_version, outputs, check_results, extra
         FROM state_versions WHERE state_id = $1 AND version = $2`,
      [head.stateId, at],
    );
    if (versions.length === 0) {
      throw new DomainError('VERSION.NOT_FOUND', `state ${head.name} has no version ${at}`);
    }
    const v = versions[0];
    const params: unknown[] = [head.stateId, at];
    const { rows } = await q.query<SliceRow>(
      prefiltered(
        candidates,
        `r.address, r.create_version, r.module_path, r.mode, r.type, r.name, r.provider,
         r.each_mode, r.resource_extra, pg_column_size(r.instance) AS stored`,
        'r.state_id = $1 AND r.create_version <= $2 AND (r.delete_version IS NULL OR r.delete_version > $2)',
        params,
      ),
      params,
    );
    const matcher = new CandidateMatcher(candidates);
    // One lifecycle of an address spans a version: a repeated address is the same row.
    // Matched in turns: the 20,000 addresses of a big slice, parsed at once, held kld's thread.
    const unique = [...new Map(rows.map((r) => [r.address, r])).values()];
    const covered = await mapInTurns(unique, (r) => {
      const parsed = parsedAddress(r.address);
      return matcher.matches(parsed).length > 0 ? parsed : null;
    });
    const { skeleton, keys } = skeletonOf(v, unique, covered);
    const pool = this.db.pool;
    const paging = this.paging;
    return {
      head,
      version: v.version,
      serial: Number(v.serial),
      instanceCount: keys.size,
      text: () => sliceText(pool, head.stateId, skeleton, keys, paging),
    };
  }

  private async requireHead(name: string, q: Queryable): Promise<EngineStateHead> {
    const head = await this.head(name, q);
    if (head === null) throw new DomainError('STATE.NOT_FOUND', `no state named "${name}"`);
    return head;
  }

  /** One consistent view of every read model the answer uses. */
  private snapshot<T>(fn: (q: Queryable) => Promise<T>): Promise<T> {
    return this.db.transaction(async (client) => {
      await client.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY');
      // Index lookups of a slice's rows: starting parallel workers costs
      // more than they save, and the planner over-estimates module ranges.
      await client.query('SET LOCAL max_parallel_workers_per_gather = 0');
      // Every read here is an index lookup by design. A state that is mostly one module (the
      // big state: 100,000 instances, two module paths) makes the planner guess that any
      // module path is half the table and scan all of it, per candidate: at 100k that was
      // 120 ms of a 7 KB scope expansion.
      await client.query('SET LOCAL enable_seqscan = off');
      return fn(client);
    });
  }
}
