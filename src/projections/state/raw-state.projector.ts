import { Inject, Optional } from '@nestjs/common';
import { EVENT_STORE, type EventStore } from '../../application/ports/event-store.port';
import type { RecordedEvent } from '../../domain/shared/event';
import {
  ApplyCommitted,
  LifecycleClosed,
  LifecycleOpened,
  StateEventType,
} from '../../domain/state';
import {
  buildDocument,
  ChunkNames,
  documentChunks,
  instanceAddressOf,
  InstanceEncoding,
  parseModulePath,
  parseStateDocument,
  resourceDescriptor,
  StateDocumentMeta,
} from '../../domain/terraform';
import { CONFIG, type Config } from '../../infrastructure/config/config';
import type { Queryable } from '../../infrastructure/postgres/database';
import { Projector } from '../projector';
import { CurrentDocument, DocumentCache, PlacedInstance } from './document-cache';
import { DEFAULT_CACHE_BUDGETS } from '../../application/bounded-cache';
import { asStateEvent } from './state-event';
import { readRawState } from '../../infrastructure/postgres/raw-state-chunks';
import { ServedInstanceBytes } from '../../application/state/served-instance-bytes';
import { joinedBytes, WrittenChunks } from '../../application/state/written-chunks';
import { binaryText, binaryUuid, copyBinaryRows } from '../../infrastructure/postgres/copy-rows';
import { COPY_ROWS, copyUnlessPresent } from './lifecycle-runs';

// Lifecycle events read per query.
const READ_AHEAD = 5000;

/** The commit being applied: its ApplyCommitted plus the lifecycle events that follow it. */
interface OpenCommit {
  stateId: string;
  version: number;
  serial: number;
  instanceCount: number;
  occurredAt: string;
  streamId: string;
  transactionId: bigint;
  /** Stream revision of the last event of this commit applied so far. */
  revision: bigint;
  doc: CurrentDocument;
  /** Lifecycle events applied to `doc` since it was last written (insertChunks). */
  lifecycles: number;
  /**
   * The version the row is taken to be at when `doc` came from the cache
   * unchecked (begin): the write checks it in its own statement.
   */
  expected?: number;
}

type LifecycleEvent = LifecycleOpened | LifecycleClosed;

/**
 * `raw_state` and `raw_state_chunks`: the current document of every live
 * state, as the chunks of its served bytes (documentChunks) and a manifest
 * listing them, so that a commit writes only the chunks it changed and a
 * terraform GET reads one manifest and its chunks.
 *
 * A commit is an ApplyCommitted followed by the lifecycle events of the
 * instances it changed, so the projector keeps each state's document taken
 * apart in memory (DocumentCache) and re-serialises after applying the delta.
 * The row's `version` is the truth: the cache is used only when it holds
 * exactly that version, otherwise (restart, another replica, a rolled-back
 * batch, a rebuild) the document is parsed back from the row itself.
 *
 * A row is only ever written with a whole commit applied, never half of one,
 * because GET serves it. So the projector takes only ApplyCommitted from
 * its batches and reads that commit's lifecycle events from its stream itself
 * (they were appended in the same transaction, right after it): a commit is
 * applied whole wherever batches end, and a first commit of a big state is
 * read once rather than once more in every batch it spans.
 *
 * The row holds only the current document, so a batch that carries several
 * commits of one state (a catch-up, a rebuild) applies them one after the
 * other in memory and writes the row once, with the last: serialising every
 * intermediate document of a big state would cost a whole document each.
 */
@Projector()
export class RawStateProjector implements Projector {
  readonly name = 'state-raw';
  readonly handles = [
    StateEventType.StateCreated,
    StateEventType.ApplyCommitted,
    StateEventType.StateDeleted,
  ];
  readonly tables = ['raw_state', 'raw_state_chunks'];

  private readonly cache: DocumentCache;
  /**
   * Each instance object as served and its digest (ServedInstanceBytes,
   * shared with the commit handler, which warms a commit's new instances).
   */
  private readonly encoding: InstanceEncoding;

  /** The ids of the chunks written last, so a commit hashes only the chunks it changed. */
  private readonly chunkNames = new ChunkNames();

  /** Instances held in memory: cached documents, and commits not yet written in a batch. */
  private readonly maxUnwritten: number;

  // Built by Nest with kld's Config (KL_CACHE_DOCUMENT_INSTANCES); without one, the default.
  constructor(
    @Inject(EVENT_STORE) private readonly events: EventStore,
    @Optional() @Inject(CONFIG) config?: Pick<Config, 'cache'>,
    @Optional() served?: ServedInstanceBytes,
    /** Where this process's document read model finds the chunks just written. */
    @Optional() private readonly written?: WrittenChunks,
  ) {
    this.encoding = (served ?? new ServedInstanceBytes()).encoding;
    this.maxUnwritten = (config?.cache ?? DEFAULT_CACHE_BUDGETS).documentInstances;
    this.cache = new DocumentCache(this.maxUnwritten);
  }

  async apply(events: RecordedEvent[], tx: Queryable): Promise<void> {
    // Commits applied in memory whose row is written at the end of the batch.
    const unwritten = new Map<string, OpenCommit>();
    // States whose row this batch created (at version 0, no document).
    const created = new Set<string>();
    for (const recorded of events) {
      const event = asStateEvent(recorded);
      if (event === null) continue;
      switch (event.type) {
        case 'StateCreated': {
          const { rowCount } = await tx.query(
            // No conflict target: a redelivered creation of a since deleted state
            // must not collide with the live state that took over its name.
            `INSERT INTO raw_state (state_id, name, version, updated_at) VALUES ($1, $2, 0, $3)
             ON CONFLICT DO NOTHING`,
            [event.data.stateId, event.data.name, recorded.metadata.occurredAt],
          );
          if (rowCount === 1) created.add(event.data.stateId);
          break;
        }
        case 'ApplyCommitted': {
          const previous = unwritten.get(event.data.stateId);
          const open = previous
            ? follow(previous, recorded, event.data)
            : await this.begin(tx, recorded, event.data, created.has(event.data.stateId));
          if (open) {
            await this.readLifecycles(open);
            checkCount(open);
            unwritten.set(open.stateId, open);
            if (!previous && held(unwritten) > this.maxUnwritten) {
              // Many states in one batch: bound the memory, not the writes.
              for (const o of unwritten.values()) await this.write(tx, o);
              unwritten.clear();
            }
          }
          break;
        }
        case 'StateDeleted':
          unwritten.delete(event.data.stateId);
          this.cache.remove(event.data.stateId);
          this.written?.forget(event.data.stateId);
          await tx.query('DELETE FROM raw_state WHERE state_id = $1', [event.data.stateId]);
          await tx.query('DELETE FROM raw_state_chunks WHERE state_id = $1', [event.data.stateId]);
          break;
        default:
          break; // lifecycle events are read with their commit
      }
    }
    for (const open of unwritten.values()) await this.write(tx, open);
  }

  private async rowVersion(tx: Queryable, stateId: string): Promise<number | null> {
    const { rows } = await tx.query<{ version: number }>(
      'SELECT version FROM raw_state WHERE state_id = $1',
      [stateId],
    );
    return rows.length ? rows[0].version : null;
  }

  /**
   * Null when the row already holds this commit (a redelivered batch). The
   * row's version is read first, unless the cache holds the version before
   * this commit's: the row is then almost always there too (this process
   * wrote it last), and the write checks that in its own statement instead
   * (writeAtOnce), one round trip less for a small command. A row this
   * batch created (`created`) is at version 0, and a row at version 0 holds
   * no document: neither is read back (two round trips of a first commit,
   * which its answer waited for).
   */
  private async begin(
    tx: Queryable,
    recorded: RecordedEvent,
    d: ApplyCommitted['data'],
    created: boolean,
  ): Promise<OpenCommit | null> {
    let doc = this.cache.take(d.stateId);
    let expected: number | undefined;
    if (doc?.version === d.version - 1) {
      expected = doc.version;
    } else {
      const current = created ? 0 : await this.rowVersion(tx, d.stateId);
      // No row: the state was deleted after this commit (a redelivered batch).
      if (current === null || current >= d.version) return null;
      if (current !== d.version - 1) {
        throw new Error(`raw_state of ${d.stateId} is at version ${current}, got ${d.version}`);
      }
      if (doc?.version !== current) {
        doc = current === 0 ? emptyDocument(0) : await this.load(tx, d.stateId, current);
      }
    }
    doc.meta = metaOf(d);
    return {
      expected,
      stateId: d.stateId,
      version: d.version,
      serial: d.serial,
      instanceCount: d.instanceCount,
      occurredAt: recorded.metadata.occurredAt,
      streamId: recorded.streamId,
      transactionId: recorded.position.transactionId,
      revision: recorded.streamRevision,
      doc,
      lifecycles: 0,
    };
  }

  private async load(tx: Queryable, stateId: string, version: number): Promise<CurrentDocument> {
    const stored = await readRawState(tx, stateId);
    if (stored?.bytes == null) return emptyDocument(version);
    const instances = new Map<string, PlacedInstance>();
    const doc = parseStateDocument(stored.bytes.toString('utf8'));
    // Not flattenInstances: hashing every instance would double the cost of a miss.
    for (const r of doc.resources) {
      const resource = resourceDescriptor(r);
      const module = parseModulePath(resource.module);
      for (const instance of r.instances) {
        const address = instanceAddressOf(module, resource, instance);
        instances.set(address, { resource, instance });
      }
    }
    return { version, meta: metaOf(null), instances, chunks: stored.chunks };
  }

  /**
   * Applies the commit's lifecycle events: from memory when this process
   * appended the commit and still holds it, else read from its stream.
   */
  private async readLifecycles(open: OpenCommit): Promise<void> {
    const held = this.events.heldAppend(open.transactionId);
    if (held !== null) {
      applyLifecycles(open, held);
      return;
    }
    for (;;) {
      const events = await this.events.readStream(open.streamId, {
        fromRevision: open.revision + 1n,
        maxCount: READ_AHEAD,
      });
      if (!applyLifecycles(open, events) || events.length < READ_AHEAD) return;
    }
  }

  /**
   * Writes the chunks this version has and the last written one had not,
   * deletes those it no longer has, and points the row at the new manifest:
   * a delta of a few instances writes a few chunks, however big the state.
   */
  private async write(tx: Queryable, open: OpenCommit): Promise<void> {
    const { doc } = open;
    const chunks = documentChunks(
      buildDocument(doc.meta, doc.instances.values()),
      this.encoding,
      this.chunkNames,
    );
    const ids = chunks.map((c) => c.id);
    const had = new Set(doc.chunks ?? []);
    const has = new Set(ids);
    const added = new Map(chunks.filter((c) => !had.has(c.id)).map((c) => [c.id, c]));
    const gone = [...had].filter((id) => !has.has(id));
    const manyChanges = open.lifecycles >= COPY_ROWS;
    if (open.expected !== undefined) {
      if (!manyChanges && added.size <= INSERT_BATCH) {
        await writeAtOnce(tx, open, open.expected, ids, gone, [...added.values()]);
        this.wrote(open, ids, chunks);
        return;
      }
      // Too much for one statement: the row is checked before anything is written.
      const current = await this.rowVersion(tx, open.stateId);
      if (current !== open.expected) throw new RowNotCachedError(open.stateId, open.expected);
    }
    if (gone.length > 0) {
      await tx.query('DELETE FROM raw_state_chunks WHERE state_id = $1 AND chunk_id = ANY($2)', [
        open.stateId,
        gone,
      ]);
    }
    await insertChunks(tx, open.stateId, [...added.values()], manyChanges);
    await tx.query(
      `UPDATE raw_state SET version = $2, serial = $3, chunks = $4, updated_at = $5
        WHERE state_id = $1`,
      [open.stateId, open.version, open.serial, ids, open.occurredAt],
    );
    this.wrote(open, ids, chunks);
  }

  /**
   * The written chunks are kept for as long as the document they were cut
   * from: their parts are mostly its instances' served bytes, which the
   * cache holds anyway, so a state the cache drops (pushed out by others,
   * a replay's among them, or alone over its budget) takes its chunks along
   * instead of keeping those bytes alive beside the cache.
   */
  private wrote(open: OpenCommit, ids: string[], chunks: NewChunk[]): void {
    open.doc.version = open.version;
    open.doc.chunks = ids;
    const dropped = this.cache.put(open.stateId, open.doc);
    for (const stateId of dropped) this.written?.forget(stateId);
    if (!dropped.includes(open.stateId)) this.written?.remember(open.stateId, chunks);
  }
}

/** Chunks per INSERT: three parameters each, far below the protocol's 65,535. */
const INSERT_BATCH = 500;

// Bytes of new chunks from which they go by COPY, when the commits they
// come from changed many instances (COPY_ROWS lifecycles: a first commit, a
// replay). Never a few changes, however big their chunks: COPY's savepoint
// is two more round trips, and a command's read models caught up together
// share a connection that takes no COPY (ProjectionRunner: below every
// projector's COPY threshold).
const COPY_BYTES = 1 << 20;

type NewChunk = { id: string; parts: Buffer[]; size: number; joined?: Buffer };

/**
 * Writes new chunks: many bytes (a first commit, a replay) with one binary
 * COPY, whose bytes go out as they are, where a statement's parameters
 * would be copied into node-postgres's bind buffer as it grows (about two
 * and a half copies of a big state's 13 MB); a few with INSERT. A
 * redelivered batch whose chunks exist already (COPY cannot skip them)
 * falls back to the INSERT, which ignores them: both write the same rows.
 */
async function insertChunks(
  tx: Queryable,
  stateId: string,
  chunks: NewChunk[],
  manyChanges: boolean,
): Promise<void> {
  let bytes = 0;
  for (const c of chunks) bytes += c.size;
  if (manyChanges && bytes >= COPY_BYTES) {
    const state = binaryUuid(stateId);
    const copied = await copyUnlessPresent(tx, (first) =>
      copyBinaryRows(
        tx,
        'raw_state_chunks',
        ['state_id', 'chunk_id', 'bytes'],
        chunks.map((c) => [state, binaryText(c.id), c.parts]),
        first,
      ),
    );
    if (copied) return;
  }
  await insertChunkRows(tx, stateId, chunks);
}

async function insertChunkRows(tx: Queryable, stateId: string, chunks: NewChunk[]): Promise<void> {
  for (let i = 0; i < chunks.length; i += INSERT_BATCH) {
    const batch = chunks.slice(i, i + INSERT_BATCH);
    const params: unknown[] = [stateId];
    const rows = batch.map((c) => {
      // A Buffer parameter travels as the column's binary form: no escaping.
      params.push(c.id, joinedBytes(c));
      return `($1, $${params.length - 1}, $${params.length})`;
    });
    await tx.query(
      `INSERT INTO raw_state_chunks (state_id, chunk_id, bytes) VALUES ${rows.join(', ')}
       ON CONFLICT DO NOTHING`,
      params,
    );
  }
}

/**
 * The cached document was not the row's (written by another process since,
 * or a batch that wrote it rolled back): nothing was written, and the batch
 * is applied again, reading the row (the cache no longer holds the state).
 */
class RowNotCachedError extends Error {
  constructor(stateId: string, expected: number) {
    super(`raw_state of ${stateId} was not at version ${expected}: applying again from the row`);
    this.name = 'RowNotCachedError';
  }
}

/**
 * A commit of a few chunks in one statement, when the row was taken to be
 * at `expected` unread: the chunks gone deleted, the new ones inserted and
 * the manifest moved only if the row is at `expected`, or nothing at all
 * (RowNotCachedError).
 */
async function writeAtOnce(
  tx: Queryable,
  open: OpenCommit,
  expected: number,
  ids: string[],
  gone: string[],
  added: NewChunk[],
): Promise<void> {
  const params: unknown[] = [
    open.stateId,
    open.version,
    open.serial,
    ids,
    open.occurredAt,
    expected,
    gone,
  ];
  const rows = added.map((c) => {
    // A Buffer parameter travels as the column's binary form: no escaping.
    params.push(c.id, joinedBytes(c));
    return `($${params.length - 1}::text, $${params.length}::bytea)`;
  });
  const { rowCount } = await tx.query(
    `WITH current AS (
       SELECT state_id FROM raw_state WHERE state_id = $1 AND version = $6
     ), gone AS (
       DELETE FROM raw_state_chunks c USING current
        WHERE c.state_id = current.state_id AND c.chunk_id = ANY($7::text[])
     )${
       rows.length === 0
         ? ''
         : `, added AS (
       INSERT INTO raw_state_chunks (state_id, chunk_id, bytes)
       SELECT current.state_id, a.id, a.bytes FROM current, (VALUES ${rows.join(', ')}) AS a (id, bytes)
       ON CONFLICT DO NOTHING
     )`
     }
     UPDATE raw_state r SET version = $2, serial = $3, chunks = $4, updated_at = $5
       FROM current WHERE r.state_id = current.state_id`,
    params,
  );
  if (rowCount !== 1) throw new RowNotCachedError(open.stateId, expected);
}

function held(unwritten: Map<string, OpenCommit>): number {
  let instances = 0;
  for (const o of unwritten.values()) instances += o.doc.instances.size;
  return instances;
}

/** The next commit of a state whose previous one this batch applied in memory. */
function follow(
  previous: OpenCommit,
  recorded: RecordedEvent,
  d: ApplyCommitted['data'],
): OpenCommit | null {
  if (d.version <= previous.version) return null;
  if (d.version !== previous.version + 1) {
    throw new Error(
      `raw_state of ${d.stateId} is at version ${previous.version}, got ${d.version}`,
    );
  }
  previous.doc.meta = metaOf(d);
  return {
    stateId: d.stateId,
    version: d.version,
    serial: d.serial,
    instanceCount: d.instanceCount,
    occurredAt: recorded.metadata.occurredAt,
    streamId: recorded.streamId,
    transactionId: recorded.position.transactionId,
    revision: recorded.streamRevision,
    doc: previous.doc,
    lifecycles: previous.lifecycles,
    expected: previous.expected,
  };
}

/**
 * A count that disagrees with the commit means events are missing; serving
 * the document would hand terraform a state without some of its resources.
 */
function checkCount(open: OpenCommit): void {
  if (open.doc.instances.size !== open.instanceCount) {
    throw new Error(
      `state ${open.stateId} version ${open.version}: ${open.doc.instances.size} instances ` +
        `projected, the commit has ${open.instanceCount}`,
    );
  }
}

/**
 * Applies the lifecycle events of `open`'s commit among `events` (its
 * stream's, in order, from anywhere up to its revision on); false once one
 * is not of the commit: its events were appended with it, in one
 * transaction, right after it.
 */
function applyLifecycles(open: OpenCommit, events: readonly RecordedEvent[]): boolean {
  for (const recorded of events) {
    if (recorded.streamId !== open.streamId || recorded.streamRevision <= open.revision) continue;
    if (recorded.position.transactionId !== open.transactionId) return false;
    const event = asStateEvent(recorded);
    if (event?.type !== 'LifecycleOpened' && event?.type !== 'LifecycleClosed') return false;
    if (event.data.stateId !== open.stateId || event.data.version !== open.version) return false;
    applyLifecycle(open.doc, event);
    open.revision = recorded.streamRevision;
    open.lifecycles++;
  }
  return true;
}

function applyLifecycle(doc: CurrentDocument, event: LifecycleEvent): void {
  if (event.type === 'LifecycleClosed') {
    doc.instances.delete(event.data.address);
  } else {
    doc.instances.set(event.data.address, {
      resource: event.data.resource,
      instance: event.data.instance,
    });
  }
}

/** A state's document before its first commit: no instances, no chunks. */
function emptyDocument(version: number): CurrentDocument {
  return { version, meta: metaOf(null), instances: new Map(), chunks: null };
}

function metaOf(d: ApplyCommitted['data'] | null): StateDocumentMeta {
  if (d === null) {
    return {
      terraformVersion: '',
      serial: 0,
      lineage: '',
      outputs: {},
      checkResults: null,
      extra: {},
    };
  }
  return {
    terraformVersion: d.terraformVersion,
    serial: d.serial,
    lineage: d.lineage,
    outputs: d.outputs,
    checkResults: d.checkResults,
    extra: d.extra,
  };
}
