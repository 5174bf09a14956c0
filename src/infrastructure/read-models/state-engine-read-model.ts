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
  JsonValue,
  OutputV4,
  ResourceMode,
  stateDocumentText,
} from '../../domain/terraform';
import { descriptorOf } from './resource-descriptor-row';
import type { Database, Queryable } from '../postgres/database';

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
  /** Instance addresses in the slice. */
  instances: string[];
  /** A terraform state document (version 4) holding only the slice, and every output. */
  document: string;
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
  resource_address: string;
  module_path: string;
  mode: ResourceMode;
  type: string;
  name: string;
  provider: string;
  each_mode: 'list' | 'map' | null;
  resource_extra: JsonObject | null;
  instance: InstanceObjectV4;
}

interface VersionRow {
  version: number;
  serial: string;
  lineage: string;
  terraform_version: string;
  outputs: Record<string, OutputV4>;
  check_results: JsonValue | null;
  extra: JsonObject | null;
}

/**
 * The prefilter for candidates: rows of the named resources (type and
 * name, and the instance key when the candidate names one: module keys are
 * left to the matcher), of the selected types, or under the named
 * top-level module calls. It reads the (type, name, index_key) and module
 * path indexes, so a slice reads its own rows; the matcher decides.
 */
function prefilter(candidates: Candidate[]): unknown[] {
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
    } else if (c.type !== null) selected.add(c.type);
    else modules.add(`module.${c.glob.modules[0].name}`);
  }
  return [
    whole.types,
    whole.names,
    keyed.types,
    keyed.names,
    keyed.keys,
    [...selected],
    [...modules],
  ];
}

const PREFILTER = `((r.type, r.name) IN (SELECT * FROM unnest($2::text[], $3::text[]))
  OR (r.type, r.name, r.index_key) IN (SELECT * FROM unnest($4::text[], $5::text[], $6::text[]))
  OR r.type = ANY($7::text[])
  OR r.module_path = ANY($8::text[])
  OR EXISTS (SELECT 1 FROM unnest($8::text[]) m
              WHERE r.module_path LIKE replace(replace(m, '_', '\\_'), '%', '\\%') || '.%'
                 OR r.module_path LIKE replace(replace(m, '_', '\\_'), '%', '\\%') || '[%'))`;

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
 * What the state-engine lane reads (ADR 0029): state metadata, scope
 * expansion and slices, from the read models (resources, their lifecycles
 * and dependency edges), never by parsing the trunk, so the cost follows
 * the slice. Each answer is read in one snapshot.
 */
export class StateEngineReadModel {
  constructor(private readonly db: Database) {}

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
    return this.snapshot(async (q) => {
      const head = await this.requireHead(name, q);
      const { rows } = await q.query<{ address: string; resource_address: string; live: boolean }>(
        `SELECT DISTINCT r.address, r.resource_address, r.delete_version IS NULL AS live
           FROM resources r WHERE r.state_id = $1 AND ${PREFILTER}`,
        [head.stateId, ...prefilter(candidates)],
      );
      const matcher = new CandidateMatcher(candidates);
      const matched: RealizedInstance[][] = candidates.map(() => []);
      const seenBefore = new Set<number>();
      // Rows are distinct (address, live) pairs: a live address comes once.
      for (const row of rows) {
        for (const i of matcher.matches(parsedAddress(row.address))) {
          if (row.live) {
            matched[i].push({ address: row.address, resourceAddress: row.resource_address });
          } else seenBefore.add(i);
        }
      }
      const inScope = [...new Set(matched.flat().map((m) => m.resourceAddress))];
      const dependencies = await this.walk(q, head.stateId, inScope, 'up');
      const dependents = await this.walk(q, head.stateId, inScope, 'down');
      const named = [...new Set(dependencies.map((d) => d.address))];
      const { rows: realizedRows } = await q.query<{ resource_address: string }>(
        `SELECT DISTINCT resource_address FROM resources
          WHERE state_id = $1 AND delete_version IS NULL AND resource_address = ANY($2::text[])`,
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
    });
  }

  /**
   * The transitive dependency closure of `from` (resource addresses) over
   * the live edges, upstream (what they depend on) or downstream (who
   * depends on them), each address with the resource it was reached from.
   */
  private async walk(
    q: Queryable,
    stateId: string,
    from: string[],
    direction: 'up' | 'down',
  ): Promise<{ address: string; via: string }[]> {
    if (from.length === 0) return [];
    const [next, prev] =
      direction === 'up'
        ? ['to_address', 'from_resource_address']
        : ['from_resource_address', 'to_address'];
    const { rows } = await q.query<{ address: string; via: string; depth: number }>(
      `WITH RECURSIVE walk(address, via, depth) AS (
         SELECT DISTINCT d.${next}, d.${prev}, 1 FROM resource_dependencies d
          WHERE d.state_id = $1 AND d.delete_version IS NULL AND d.${prev} = ANY($2::text[])
         UNION
         SELECT d.${next}, d.${prev}, w.depth + 1 FROM resource_dependencies d
           JOIN walk w ON d.${prev} = w.address
          WHERE d.state_id = $1 AND d.delete_version IS NULL AND w.depth < 64
       )
       SELECT address, min(via) AS via, min(depth) AS depth FROM walk
        GROUP BY address ORDER BY min(depth), address`,
      [stateId, from],
    );
    return rows.map((r) => ({ address: r.address, via: r.via }));
  }

  /**
   * A slice: the instances the candidates cover at `version` (the current
   * one by default), with every output of that version, as a document
   * carrying the trunk's lineage and that version's serial.
   */
  async slice(name: string, candidates: Candidate[], version?: number): Promise<Slice> {
    return this.snapshot(async (q) => {
      const head = await this.requireHead(name, q);
      const at = version ?? head.version;
      const { rows: versions } = await q.query<VersionRow>(
        `SELECT version, serial, lineage, terraform_version, outputs, check_results, extra
           FROM state_versions WHERE state_id = $1 AND version = $2`,
        [head.stateId, at],
      );
      if (versions.length === 0) {
        throw new DomainError('VERSION.NOT_FOUND', `state ${name} has no version ${at}`);
      }
      const v = versions[0];
      const { rows } = await q.query<SliceRow>(
        `SELECT r.address, r.resource_address, r.module_path, r.mode, r.type, r.name, r.provider,
                r.each_mode, r.resource_extra, r.instance
           FROM resources r
          WHERE r.state_id = $1 AND r.create_version <= $9
            AND (r.delete_version IS NULL OR r.delete_version > $9) AND ${PREFILTER}`,
        [head.stateId, ...prefilter(candidates), at],
      );
      const matcher = new CandidateMatcher(candidates);
      const picked = rows.filter((r) => matcher.matches(parsedAddress(r.address)).length > 0);
      const doc = buildDocument(
        {
          terraformVersion: v.terraform_version,
          serial: Number(v.serial),
          lineage: v.lineage,
          outputs: v.outputs,
          checkResults: v.check_results,
          extra: v.extra ?? {},
        },
        picked.map((r) => ({ resource: descriptorOf(r), instance: r.instance })),
      );
      return {
        head,
        version: v.version,
        serial: Number(v.serial),
        instances: picked.map((r) => r.address).sort(),
        document: stateDocumentText(doc),
      };
    });
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
      return fn(client);
    });
  }
}
