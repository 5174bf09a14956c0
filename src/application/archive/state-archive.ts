import { createHash } from 'node:crypto';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { DomainError } from '../../domain/shared/domain-error';
import { WrongExpectedRevisionError } from '../../domain/shared/concurrency-error';
import { EventMetadata, ImportProvenance } from '../../domain/shared/event';
import { currentSchemaVersion } from '../../domain/shared/upcasting';
import { formatCursor } from '../../domain/shared/log-cursor';
import { textProblem } from '../../domain/shared/storable-text';
import {
  ArchivedStateEvent,
  ARCHIVE_INVALID,
  replayStateHistory,
  STATE_NOT_FOUND,
  stateStreamId,
} from '../../domain/state';
import { isJsonObject, JsonObject, parseJsonLossless, unmarkNumbers } from '../../domain/terraform';
import type { Caller } from '../command-context';
import type { Clock, Ids } from '../ports/clock.port';
import type { EventStore } from '../ports/event-store.port';
import { awaitReadModels, ReadModelSync } from '../ports/read-model-sync.port';

export const STATE_ARCHIVES = Symbol('StateArchives');
export const ARCHIVE_FORMAT = 'kilolock-state-archive';
export const ARCHIVE_VERSION = 1;
/** An import onto a name that already has a history. */
export const STATE_EXISTS = 'STATE.EXISTS';

const PAGE = 1000;
/** Archive text built between two turns of the event loop. */
const SLICE_BYTES = 256 * 1024;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const MAX_META_TEXT = 200;

/** The first line of an archive. */
export interface ArchiveHeader {
  format: typeof ARCHIVE_FORMAT;
  version: number;
  state: string;
  events: number;
  exportedAt: string;
  /** sha256 of every line after the header, each with its newline. */
  checksum: string;
}

/** Every later line: one event of the state's stream, in order. */
interface ArchiveLine {
  revision: number;
  eventId: string;
  position: string;
  type: string;
  schemaVersion: number;
  metadata: EventMetadata;
  data: unknown;
}

/**
 * `kl archive export|import`: a state's whole history as NDJSON (a header,
 * then every event of its stream with its metadata), and back, under its
 * name or a new one. An import replays the history through the State
 * decider (replayStateHistory) and appends it in one transaction: every
 * version, serial, lifecycle, lock, actor and time comes back, as new events
 * that say which ones they recreate.
 */
export class StateArchives {
  constructor(
    private readonly store: EventStore,
    private readonly sync: ReadModelSync,
    private readonly clock: Clock,
    /** The recreated state's ids (its new stateId). */
    private readonly ids: Ids,
    /** The recreated events' ids: the same source as a command's (EVENT_IDS in kld, time-ordered). */
    private readonly eventIds: Ids,
    /** Where exports read the history (BULK_EVENT_STORE in kld). */
    private readonly exportReads: Pick<EventStore, 'readStream'> = store,
  ) {}

  /**
   * The archive, line by line. The stream is read twice (once for the
   * checksum the header carries), up to where it was when the export began.
   */
  async *export(name: string): AsyncGenerator<string> {
    const stream = stateStreamId(name);
    const hash = createHash('sha256');
    let count = 0;
    for await (const line of this.lines(stream, Infinity)) {
      hash.update(line);
      count++;
    }
    if (count === 0) throw new DomainError(STATE_NOT_FOUND, `state ${name} has no history`);
    const header: ArchiveHeader = {
      format: ARCHIVE_FORMAT,
      version: ARCHIVE_VERSION,
      state: name,
      events: count,
      exportedAt: this.clock.now().toISOString(),
      checksum: `sha256:${hash.digest('hex')}`,
    };
    yield `${JSON.stringify(header)}\n`;
    yield* this.lines(stream, count);
  }

  private async *lines(stream: string, upTo: number): AsyncGenerator<string> {
    let sliceBytes = 0;
    for (let from = 0; from < upTo;) {
      const page = await this.exportReads.readStream(stream, {
        fromRevision: BigInt(from),
        maxCount: Math.min(PAGE, upTo - from),
        dataAsText: true,
      });
      for (const e of page) {
        const head: Omit<ArchiveLine, 'data'> = {
          revision: Number(e.streamRevision),
          eventId: e.eventId,
          position: formatCursor(e.position),
          type: e.type,
          schemaVersion: e.schemaVersion,
          metadata: e.metadata,
        };
        // The stored text is what JSON.stringify of the parsed data gives:
        // set in as it is, the line is what stringifying the whole would give.
        const data = e.dataJson ?? JSON.stringify(e.data);
        const line = unmarkNumbers(`${JSON.stringify(head).slice(0, -1)},"data":${data}}\n`);
        sliceBytes += line.length;
        yield line;
        // A consumer that never waits (a socket that drains at once, the
        // checksum pass) would otherwise hold kld's event loop for the
        // whole history: others' requests get a turn every slice.
        if (sliceBytes >= SLICE_BYTES) {
          sliceBytes = 0;
          await nextTurn();
        }
      }
      if (page.length < PAGE) return;
      from += page.length;
    }
  }

  /**
   * Recreates the archived history under `name` (default: the archive's,
   * which `validName` checks as any state name is checked).
   */
  async import(
    text: string,
    name: string | null,
    caller: Caller,
    validName: (name: string) => string,
  ): Promise<{ state: string; events: number; versions: number }> {
    const { header, lines } = readArchive(text);
    const target = name ?? validName(header.state);
    const archived = lines.map((line, i) => checkLine(line, i));
    const { events, versions } = replayStateHistory(
      archived.map((l): ArchivedStateEvent => ({ type: l.type, data: l.data })),
      target,
      () => this.ids.uuid(),
    );
    const importedAt = this.clock.now().toISOString();
    let result;
    try {
      result = await this.store.appendToStream(
        stateStreamId(target),
        events.map((e, i) => ({
          eventId: this.eventIds.uuid(),
          type: e.type,
          schemaVersion: currentSchemaVersion(e.type),
          data: e.data,
          metadata: {
            actor: archived[i].metadata.actor,
            correlationId: archived[i].metadata.correlationId,
            causationId: archived[i].metadata.causationId,
            occurredAt: new Date(archived[i].metadata.occurredAt).toISOString(),
            imported: provenance(archived[i], header, importedAt, caller.actor),
          },
        })),
        { expectedRevision: 'no_stream' },
      );
    } catch (err) {
      if (!(err instanceof WrongExpectedRevisionError)) throw err;
      throw new DomainError(
        STATE_EXISTS,
        `state ${target} already has a history here; import the archive under a new name (--name)`,
      );
    }
    await awaitReadModels(
      this.sync,
      result.position,
      () => `imported ${events.length} events as state ${target}`,
    );
    return { state: target, events: events.length, versions };
  }
}

function provenance(
  line: ArchiveLine,
  header: ArchiveHeader,
  importedAt: string,
  importedBy: string,
): ImportProvenance {
  const given = line.metadata.imported as Partial<ImportProvenance> | undefined;
  const text = (v: unknown) =>
    typeof v === 'string' && v.length <= MAX_META_TEXT && textProblem(v) === null;
  // Through repeated imports the first original is named, if the archive says it well.
  const earlier =
    given && text(given.eventId) && text(given.stream) && text(given.position) ? given : null;
  return {
    eventId: earlier?.eventId ?? line.eventId,
    stream: earlier?.stream ?? stateStreamId(header.state),
    position: earlier?.position ?? line.position,
    archive: header.checksum,
    importedAt,
    importedBy,
  };
}

function invalid(message: string): DomainError {
  return new DomainError(ARCHIVE_INVALID, message);
}

/** Splits the archive into its header and event lines, and checks the checksum. */
function readArchive(text: string): { header: ArchiveHeader; lines: string[] } {
  const all = text.split('\n');
  if (all[all.length - 1] === '') all.pop();
  let header: Partial<ArchiveHeader>;
  try {
    header = JSON.parse(all[0] ?? '') as Partial<ArchiveHeader>;
  } catch {
    throw invalid(`not a state archive: the first line is not a JSON header`);
  }
  if (!isJsonObject(header) || header.format !== ARCHIVE_FORMAT) {
    throw invalid(`not a state archive: the header does not say format "${ARCHIVE_FORMAT}"`);
  }
  if (header.version !== ARCHIVE_VERSION) {
    throw invalid(
      `archive format version ${String(header.version)} is not one this kld reads (${ARCHIVE_VERSION})`,
    );
  }
  if (typeof header.state !== 'string' || typeof header.checksum !== 'string') {
    throw invalid('the archive header names no state or checksum');
  }
  const lines = all.slice(1);
  if (header.events !== lines.length) {
    throw invalid(`the header says ${header.events} events, the archive has ${lines.length}`);
  }
  const hash = createHash('sha256');
  for (const line of lines) hash.update(`${line}\n`);
  if (`sha256:${hash.digest('hex')}` !== header.checksum) {
    throw invalid('the checksum does not match: the archive was changed or cut short');
  }
  return { header: header as ArchiveHeader, lines };
}

/** One event line, parsed keeping numbers exact, with the fields an event needs. */
function checkLine(text: string, i: number): ArchiveLine {
  let value: unknown;
  try {
    value = parseJsonLossless(text);
  } catch (err) {
    throw invalid(`archive event ${i} is not valid JSON: ${(err as Error).message}`);
  }
  const line = value as Partial<ArchiveLine> & JsonObject;
  const bad = (what: string) => invalid(`archive event ${i}: ${what}`);
  if (!isJsonObject(value)) throw bad('not a JSON object');
  if (line.revision !== i) throw bad(`revision ${String(line.revision)} is out of order`);
  if (typeof line.eventId !== 'string' || !UUID.test(line.eventId))
    throw bad('eventId is not a uuid');
  if (typeof line.position !== 'string') throw bad('position is missing');
  if (typeof line.type !== 'string') throw bad('type is missing');
  // Exports are read through the upcasters: an archive holds current shapes.
  if (line.schemaVersion !== currentSchemaVersion(line.type)) {
    throw bad(
      `schema version ${String(line.schemaVersion)} of ${line.type} is not one this kld reads`,
    );
  }
  const m = line.metadata as Partial<EventMetadata> | undefined;
  if (!isJsonObject(m as JsonObject)) throw bad('metadata is missing');
  for (const field of ['actor', 'correlationId'] as const) {
    const v = m![field];
    if (typeof v !== 'string' || v.length > MAX_META_TEXT || textProblem(v) !== null) {
      throw bad(`metadata.${field} must be text of at most ${MAX_META_TEXT} characters`);
    }
  }
  const causation = m!.causationId ?? null;
  if (causation !== null && (typeof causation !== 'string' || causation.length > MAX_META_TEXT)) {
    throw bad('metadata.causationId must be short text or null');
  }
  const at = m!.occurredAt;
  if (typeof at !== 'string' || !/^\d{4}-\d\d-\d\dT/.test(at) || Number.isNaN(Date.parse(at))) {
    throw bad('metadata.occurredAt is not an ISO-8601 time');
  }
  return line as ArchiveLine;
}
