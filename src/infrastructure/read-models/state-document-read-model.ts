import type { LRUCache } from 'lru-cache';
import { boundedCache, DEFAULT_CACHE_BUDGETS } from '../../application/bounded-cache';
import { DomainError } from '../../domain/shared/domain-error';
import {
  buildDocument,
  contentMd5,
  InstanceObjectV4,
  JsonObject,
  JsonValue,
  OutputV4,
  ResourceMode,
  stateDocumentText,
} from '../../domain/terraform';
import { descriptorOf } from './resource-descriptor-row';
import type { Database } from '../postgres/database';
import { readRawState } from '../postgres/raw-state-chunks';

export interface CurrentDocument {
  stateId: string;
  /** The exact bytes to serve. */
  document: string;
  /** Base64 MD5 of `document`, for Content-MD5. */
  md5: string;
}

/** The current document as terraform's GET serves it. */
export interface ServedDocument {
  stateId: string;
  version: number;
  /** The exact bytes to serve (UTF-8). */
  body: Buffer;
  /** Base64 MD5 of `body`, for Content-MD5. */
  md5: string;
}

/** A version as terraform's GET serves it. */
export interface ServedVersion {
  version: number;
  body: Buffer;
  md5: string;
}

/** Which version of a state to read: ours, or the newest carrying a terraform serial. */
export type VersionSelector = { version: number } | { serial: number };

interface VersionRow {
  state_id: string;
  version: number;
  serial: string;
  lineage: string;
  terraform_version: string;
  instance_count: number;
  outputs: Record<string, OutputV4>;
  check_results: JsonValue | null;
  extra: JsonObject | null;
}

interface InstanceRow {
  module_path: string;
  mode: ResourceMode;
  type: string;
  name: string;
  provider: string;
  each_mode: 'list' | 'map' | null;
  resource_extra: JsonObject | null;
  instance: InstanceObjectV4;
}

const VERSION_COLUMNS = `sv.state_id, sv.version, sv.serial, sv.lineage, sv.terraform_version,
  sv.instance_count, sv.outputs, sv.check_results, sv.extra`;

/**
 * The documents of live states as terraform's GET serves them: the current
 * one from `raw_state` and the chunks its manifest lists (its bytes kept in
 * memory once served), past ones rebuilt from their lifecycles.
 */
export class StateDocumentReadModel {
  /** The last served version of each state, least recently used out, bounded by bytes. */
  private readonly served: LRUCache<string, ServedDocument & { chunks: string[] }>;

  constructor(
    private readonly db: Database,
    options: { cacheBytes?: number } = {},
  ) {
    this.served = boundedCache<ServedDocument & { chunks: string[] }>(
      options.cacheBytes ?? DEFAULT_CACHE_BUDGETS.servedBytes,
      (entry) => entry.body.length,
    );
  }

  /** The current document. Null before the first commit. */
  async current(name: string): Promise<CurrentDocument | null> {
    const served = await this.currentBody(name);
    if (served === null) return null;
    return { stateId: served.stateId, document: served.body.toString('utf8'), md5: served.md5 };
  }

  /**
   * The current document's bytes. Which version is current is asked of the
   * database every time (the row and its manifest, not the chunks), so a GET
   * after a POST sees that POST on any replica; the bytes of a version never
   * change, so they come from memory when this process has served that
   * version (with that manifest) before, and are otherwise assembled from
   * the manifest's chunks.
   */
  async currentBody(name: string): Promise<ServedDocument | null> {
    const head = await this.db.query<{ state_id: string; version: number; chunks: string[] }>(
      `SELECT r.state_id, r.version, r.chunks FROM raw_state r
         JOIN states s ON s.state_id = r.state_id AND s.deleted_at IS NULL
        WHERE r.name = $1 AND r.chunks IS NOT NULL`,
      [name],
    );
    if (head.length === 0) return null;
    const { state_id: stateId, version, chunks } = head[0];
    const cached = this.served.get(stateId);
    if (cached && cached.version === version && sameIds(cached.chunks, chunks)) return cached;
    // Only the row, by its key: were the state deleted meanwhile, the row is gone.
    const stored = await readRawState(this.db.pool, stateId);
    if (stored?.bytes == null) return null;
    const served: ServedDocument & { chunks: string[] } = {
      stateId,
      version: stored.version,
      body: stored.bytes,
      md5: contentMd5(stored.bytes),
      chunks: stored.chunks!,
    };
    this.served.set(stateId, served);
    return served;
  }

  /** The newest version that carried terraform serial `serial`, as it was served then. */
  async atSerial(name: string, serial: number): Promise<string | null> {
    return (await this.version(name, { serial }))?.body.toString('utf8') ?? null;
  }

  /** Version `version` (ours: 1, 2, 3…) as it was served while current. */
  async atVersion(name: string, version: number): Promise<string | null> {
    return (await this.version(name, { version }))?.body.toString('utf8') ?? null;
  }

  /** A past (or the current) version of a live state, rebuilt as it was served while current. */
  async version(name: string, which: VersionSelector): Promise<ServedVersion | null> {
    const rows = await this.db.query<VersionRow>(
      'version' in which
        ? `SELECT ${VERSION_COLUMNS} FROM state_versions sv
             JOIN states s ON s.state_id = sv.state_id AND s.deleted_at IS NULL
            WHERE s.name = $1 AND sv.version = $2`
        : `SELECT ${VERSION_COLUMNS} FROM state_versions sv
             JOIN states s ON s.state_id = sv.state_id AND s.deleted_at IS NULL
            WHERE s.name = $1 AND sv.serial = $2
            ORDER BY sv.version DESC LIMIT 1`,
      [name, 'version' in which ? which.version : which.serial],
    );
    if (rows.length === 0) return null;
    const body = Buffer.from(await this.rebuild(rows[0]), 'utf8');
    return { version: rows[0].version, body, md5: contentMd5(body) };
  }

  /**
   * A past version from its lifecycles: the instances alive at it, with the
   * instance JSON and resource-level members exactly as committed.
   */
  private async rebuild(v: VersionRow): Promise<string> {
    const rows = await this.db.query<InstanceRow>(
      `SELECT module_path, mode, type, name, provider, each_mode, resource_extra, instance
         FROM resources
        WHERE state_id = $1 AND create_version <= $2
          AND (delete_version IS NULL OR delete_version > $2)`,
      [v.state_id, v.version],
    );
    // Lifecycles are their own projection; until it has caught up with this
    // version the document would lack instances, and a short state must
    // never be served as if it were whole.
    if (rows.length !== v.instance_count) {
      throw new DomainError(
        'SERVER.UNAVAILABLE',
        `version ${v.version} is not fully projected yet; retry shortly`,
      );
    }
    const doc = buildDocument(
      {
        terraformVersion: v.terraform_version,
        serial: Number(v.serial),
        lineage: v.lineage,
        outputs: v.outputs,
        checkResults: v.check_results,
        extra: v.extra ?? {},
      },
      rows.map((r) => ({ resource: descriptorOf(r), instance: r.instance })),
    );
    return stateDocumentText(doc);
  }
}

function sameIds(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((id, i) => id === b[i]);
}
