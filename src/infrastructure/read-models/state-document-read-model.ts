import type { LRUCache } from 'lru-cache';
import { boundedCache, DEFAULT_CACHE_BUDGETS } from '../../application/bounded-cache';
import type { WrittenChunks } from '../../application/state/written-chunks';
import { textInTurns } from '../../application/in-turns';
import { DomainError } from '../../domain/shared/domain-error';
import {
  buildDocument,
  contentMd5,
  InstanceObjectV4,
  JsonObject,
  ResourceMode,
  stateDocumentTextPieces,
} from '../../domain/terraform';
import { descriptorOf } from './resource-descriptor-row';
import { DocumentMetaColumns, documentMetaOf } from './document-meta-row';
import { md5InSlices } from './md5-in-slices';
import { lifecyclesOfListedVersions, type VersionProjections } from './version-lifecycles';
import type { Database } from '../postgres/database';
import { readChunks, readRawStateParts } from '../postgres/raw-state-chunks';

export interface CurrentDocument {
  stateId: string;
  /** The exact bytes to serve. */
  document: string;
  /** Base64 MD5 of `document`, for Content-MD5. */
  md5: string;
}

/** A version as terraform's GET serves it. */
export interface ServedVersion {
  version: number;
  /** The exact bytes to serve (UTF-8), in order: the document is their concatenation. */
  parts: readonly Buffer[];
  /** The document's length in bytes. */
  size: number;
  /** Base64 MD5 of the document, for Content-MD5. */
  md5: string;
}

/** The current document as terraform's GET serves it. */
export interface ServedDocument extends ServedVersion {
  stateId: string;
}

/**
 * A served current document as this process keeps it, with its chunk ids
 * (the manifest's order, one per part): the next version shares most of its
 * chunks, so only its new ones are read.
 */
export interface ServedEntry extends ServedDocument {
  chunks: readonly string[];
}

/**
 * Which version of a state is current, as `currentHead` found it, with what
 * this process held for the state's name when the statement was sent: its
 * manifest is that of `held` (the same bytes), or `chunks`.
 */
export type CurrentHead = { stateId: string; version: number } & (
  { held: ServedEntry; chunks: null } | { held: ServedEntry | undefined; chunks: readonly string[] }
);

/** Which version of a state to read: ours, or the newest carrying a terraform serial. */
export type VersionSelector = { version: number } | { serial: number };

interface Making {
  stateId: string;
  version: number;
  chunks: readonly string[];
  entry: Promise<ServedEntry | null>;
}

interface VersionRow extends DocumentMetaColumns {
  state_id: string;
  version: number;
  instance_count: number;
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
  /** The last served version of each state, by name, least recently used out, bounded by bytes. */
  private readonly served: LRUCache<string, ServedEntry>;
  /** The chunks this process's raw-state projector wrote last, if it runs here. */
  private readonly written: WrittenChunks | null;
  /** The documents being made now, by name: a GET that asks for one meanwhile waits for it. */
  private readonly making = new Map<string, Making>();
  /** Where past versions are read from, and the wait for their lifecycles; null: no wait. */
  private readonly projections: VersionProjections | null;

  constructor(
    private readonly db: Database,
    options: {
      cacheBytes?: number;
      written?: WrittenChunks;
      projections?: VersionProjections;
    } = {},
  ) {
    this.written = options.written ?? null;
    this.projections = options.projections ?? null;
    this.served = boundedCache<ServedEntry>(
      options.cacheBytes ?? DEFAULT_CACHE_BUDGETS.servedBytes,
      (entry) => entry.size,
    );
  }

  /** The current document. Null before the first commit. */
  async current(name: string): Promise<CurrentDocument | null> {
    const served = await this.currentBody(name);
    if (served === null) return null;
    const document = Buffer.concat(served.parts, served.size).toString('utf8');
    return { stateId: served.stateId, document, md5: served.md5 };
  }

  /**
   * Which version of `name` is current: one statement, asked of the database
   * for every GET, so that a GET after a POST sees that POST on any replica.
   * Its manifest (the chunk ids) comes back only when it is not the one of
   * the document this process holds for the name: unchanged, the answer is a
   * row of three short columns, not a list of hundreds of ids to parse. A
   * prepared statement, so PostgreSQL plans it once per connection. Null
   * when the state does not exist or has no version yet.
   */
  currentHead(name: string): Promise<CurrentHead | null> {
    const held = this.served.get(name);
    return this.db
      .prepared<{ state_id: string; version: number; chunks: string[] | null }>(
        `SELECT r.state_id, r.version,
                CASE WHEN r.chunks = $2::text[] THEN NULL ELSE r.chunks END AS chunks
           FROM raw_state r JOIN states s ON s.state_id = r.state_id AND s.deleted_at IS NULL
          WHERE r.name = $1 AND r.chunks IS NOT NULL`,
        [name, held?.chunks ?? null],
      )
      .then((rows) => {
        if (rows.length === 0) return null;
        const { state_id: stateId, version, chunks } = rows[0];
        // Null only when equal to the held manifest, so only when one was held.
        return chunks === null
          ? { stateId, version, held: held!, chunks }
          : { stateId, version, held, chunks };
      });
  }

  /**
   * The current document's bytes, after `currentHead` (or the check given,
   * started earlier for this request). A chunk's bytes never change (its id
   * names its content), so only the chunks this process does not hold from
   * the last version it served are read: after a commit of a few instances,
   * the first chunk (it holds the serial) and the one or two the change
   * touched, not the whole document.
   */
  async currentBody(
    name: string,
    head: Promise<CurrentHead | null> = this.currentHead(name),
  ): Promise<ServedDocument | null> {
    return this.bodyOf(name, await head, false);
  }

  /**
   * Brings this process's copy of `name`'s current document up to date: the
   * changed chunks taken or read and the MD5 taken now, so the next GET is
   * served from memory. Called after a commit and when a write session ends,
   * once answered. Only when this process holds an earlier version or wrote
   * the new chunks itself: a state it neither holds nor wrote is left to the
   * GET that asks for it, since reading it whole could cost far more than
   * that GET will.
   */
  async refreshHeld(name: string): Promise<void> {
    await this.bodyOf(name, await this.currentHead(name), true);
  }

  private async bodyOf(
    name: string,
    head: CurrentHead | null,
    onlyHeld: boolean,
  ): Promise<ServedDocument | null> {
    if (head === null) return null;
    const { stateId, version } = head;
    if (head.chunks === null) {
      // The manifest of what was held: the same bytes, whichever version now names them.
      const { held } = head;
      if (held.stateId === stateId && held.version === version) return held;
      return this.keep(name, { ...held, stateId, version });
    }
    const { held, chunks } = head;
    // Made since the check was sent (a refresh after the commit, another
    // GET), or being made: that document, not a second MD5 of the same bytes.
    const now = this.served.get(name);
    if (now !== undefined && now !== held && isVersion(now, stateId, version, chunks)) return now;
    const making = this.making.get(name);
    if (making !== undefined && isVersion(making, stateId, version, chunks)) return making.entry;
    if (onlyHeld && !held && !this.written?.has(stateId)) return null;
    const entry = this.make(name, head, held, chunks);
    this.making.set(name, { stateId, version, chunks, entry });
    try {
      return await entry;
    } finally {
      if (this.making.get(name)?.entry === entry) this.making.delete(name);
    }
  }

  private async make(
    name: string,
    { stateId, version }: CurrentHead,
    held: ServedEntry | undefined,
    chunks: readonly string[],
  ): Promise<ServedEntry | null> {
    const parts = new Map<string, Buffer>();
    held?.chunks.forEach((id, i) => parts.set(id, held.parts[i]));
    // Of the chunks not held, those this process wrote are taken from memory, the others read.
    const lacking = () => [...new Set(chunks.filter((id) => !parts.has(id)))];
    this.written?.take(stateId, lacking()).forEach((bytes, id) => parts.set(id, bytes));
    const wanted = lacking();
    const read = wanted.length > 0 ? await readChunks(this.db.pool, stateId, wanted) : parts;
    if (wanted.every((id) => read.has(id))) {
      return this.keep(
        name,
        await entryOf(
          stateId,
          version,
          chunks,
          chunks.map((id) => parts.get(id) ?? read.get(id)!),
        ),
      );
    }
    // A later commit (or a deletion) removed a chunk of this manifest since
    // it was read: read the row and its chunks again, in one snapshot.
    const stored = await readRawStateParts(this.db.pool, stateId);
    if (stored?.parts == null) return null;
    return this.keep(name, await entryOf(stateId, stored.version, stored.chunks!, stored.parts));
  }

  private keep(name: string, entry: ServedEntry): ServedEntry {
    this.served.set(name, entry);
    return entry;
  }

  /** The newest version that carried terraform serial `serial`, as it was served then. */
  async atSerial(name: string, serial: number): Promise<string | null> {
    return textOf(await this.version(name, { serial }));
  }

  /** Version `version` (ours: 1, 2, 3…) as it was served while current. */
  async atVersion(name: string, version: number): Promise<string | null> {
    return textOf(await this.version(name, { version }));
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
    await this.lifecyclesOf(rows[0]);
    const body = Buffer.from(await this.rebuild(rows[0]), 'utf8');
    return { version: rows[0].version, parts: [body], size: body.length, md5: contentMd5(body) };
  }

  /**
   * Waits until the lifecycles include version `v`'s commit, which the log
   * holds (its row is listed): a read right after another caller's commit,
   * on any replica, gets that version, as kld's other reads of read models
   * get what was written before them. Only a projection that cannot get
   * there within the wait's bound (halted) answers 503.
   */
  private async lifecyclesOf(v: VersionRow): Promise<void> {
    if (this.projections === null) return;
    try {
      await lifecyclesOfListedVersions(this.db, this.projections);
    } catch (err) {
      throw notProjected(v, err);
    }
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
    // Caught up with this version (lifecyclesOf), they hold every instance;
    // should they not (an event of it skipped by an operator), a short state
    // must never be served as if it were whole.
    if (rows.length !== v.instance_count) throw notProjected(v);
    const doc = buildDocument(
      documentMetaOf(v),
      rows.map((r) => ({ resource: descriptorOf(r), instance: r.instance })),
    );
    return textInTurns(stateDocumentTextPieces(doc));
  }
}

/** Version `v` cannot be rebuilt whole now (`cause`: why its lifecycles are not there). */
function notProjected(v: VersionRow, cause?: unknown): DomainError {
  return new DomainError(
    'SERVER.UNAVAILABLE',
    `version ${v.version} is not fully projected yet; retry shortly`,
    undefined,
    cause === undefined ? undefined : { cause },
  );
}

/** Whether `x` is that version with that manifest. */
function isVersion(
  x: { stateId: string; version: number; chunks: readonly string[] },
  stateId: string,
  version: number,
  chunks: readonly string[],
): boolean {
  if (x.stateId !== stateId || x.version !== version || x.chunks.length !== chunks.length) {
    return false;
  }
  return x.chunks.every((id, i) => id === chunks[i]);
}

function textOf(served: ServedVersion | null): string | null {
  return served === null ? null : Buffer.concat(served.parts, served.size).toString('utf8');
}

/** The entry for `parts`; its MD5 is over the whole document (the serial, near its start, changes every commit). */
async function entryOf(
  stateId: string,
  version: number,
  chunks: readonly string[],
  parts: readonly Buffer[],
): Promise<ServedEntry> {
  const { md5, size } = await md5InSlices(parts);
  return { stateId, version, chunks, parts, size, md5 };
}
