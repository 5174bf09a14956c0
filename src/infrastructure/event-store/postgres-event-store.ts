import { PoolClient } from 'pg';
import {
  AppendResult,
  EventStore,
  EventToAppend,
  ExpectedRevision,
  ReadStreamOptions,
} from '../../application/ports/event-store.port';
import { WrongExpectedRevisionError } from '../../domain/shared/concurrency-error';
import { EventMetadata, LogPosition, RecordedEvent } from '../../domain/shared/event';
import { Database, Queryable } from '../postgres/database';
import { Notifier } from './notifier';

export const EVENTS_CHANNEL = 'kl_events';

// Rows per INSERT statement: keeps memory per statement bounded while the
// whole append stays one transaction.
const INSERT_CHUNK = 10_000;

interface EventRow {
  global_position: string;
  txid: string;
  stream_id: string;
  stream_revision: string;
  type: string;
  data: unknown;
  metadata: EventMetadata;
}

export const EVENT_COLUMNS =
  'global_position, transaction_id::text AS txid, stream_id, stream_revision, type, data, metadata';

export function toRecordedEvent(row: EventRow): RecordedEvent {
  return {
    type: row.type,
    data: row.data,
    metadata: row.metadata,
    streamId: row.stream_id,
    streamRevision: BigInt(row.stream_revision),
    position: {
      transactionId: BigInt(row.txid),
      globalPosition: BigInt(row.global_position),
    },
  };
}

/**
 * Reads events after `from` in log order. Only transactions older than every
 * transaction still running are visible (`pg_snapshot_xmin`), so an event can
 * never appear behind a position a reader has already passed. The horizon is
 * taken once per query (a scalar subquery, i.e. an InitPlan): evaluated per
 * row it moves during the scan and lets a late row through ahead of an
 * earlier one.
 */
export async function readLogAfter(
  q: Queryable,
  from: LogPosition,
  limit: number,
  onlyTypes?: readonly string[],
): Promise<RecordedEvent[]> {
  const dataColumn = onlyTypes ? 'CASE WHEN type = ANY($4) THEN data END AS data' : 'data';
  const params: unknown[] = [from.transactionId.toString(), from.globalPosition.toString(), limit];
  if (onlyTypes) params.push(onlyTypes);
  const { rows } = await q.query<EventRow>(
    `SELECT global_position, transaction_id::text AS txid, stream_id, stream_revision,
            type, ${dataColumn}, metadata
       FROM kl_events
      WHERE (transaction_id, global_position) > ($1::xid8, $2::bigint)
        AND transaction_id < (SELECT pg_snapshot_xmin(pg_current_snapshot()))
      ORDER BY kl_events.transaction_id, kl_events.global_position
      LIMIT $3`,
    params,
  );
  return rows.map(toRecordedEvent);
}

export class PostgresEventStore implements EventStore {
  constructor(
    private readonly db: Database,
    private readonly notifier: Notifier,
  ) {}

  async appendToStream(
    streamId: string,
    events: EventToAppend[],
    { expectedRevision }: { expectedRevision: ExpectedRevision },
  ): Promise<AppendResult> {
    const result = await this.db.transaction(async (tx) => {
      const count = BigInt(events.length);
      const length = await advanceStream(tx, streamId, count, expectedRevision);
      let base = length - count;
      let last: { global_position: string; txid: string } | undefined;
      for (let i = 0; i < events.length; i += INSERT_CHUNK) {
        const chunk = events.slice(i, i + INSERT_CHUNK);
        // Data and metadata travel as JSON lines, one text parameter each:
        // JSON.stringify never writes a raw newline, and PostgreSQL splits
        // the lines in C, where a text[] parameter would have node-pg escape
        // every quote of every event. `data` is cast to json, which keeps
        // the text exactly as written, \u0000 escapes included.
        const { rows } = await tx.query<{ global_position: string; txid: string }>(
          `WITH appended AS (
             INSERT INTO kl_events (stream_id, stream_revision, type, data, metadata)
             SELECT $1, $2::bigint + u.ord - 1, u.type, u.data::json, u.metadata::jsonb
               FROM unnest($3::text[], string_to_array($4, chr(10)), string_to_array($5, chr(10)))
                    WITH ORDINALITY AS u(type, data, metadata, ord)
              ORDER BY u.ord
             RETURNING global_position, transaction_id
           )
           SELECT max(global_position) AS global_position, max(transaction_id::text) AS txid
             FROM appended`,
          [
            streamId,
            base.toString(),
            chunk.map((e) => e.type),
            jsonLines(chunk.map((e) => e.data)),
            jsonLines(chunk.map((e) => e.metadata)),
          ],
        );
        base += BigInt(chunk.length);
        for (const row of rows) {
          if (!last || BigInt(row.global_position) > BigInt(last.global_position)) last = row;
        }
      }
      const position = last
        ? {
            transactionId: BigInt(last.txid),
            globalPosition: BigInt(last.global_position),
          }
        : { transactionId: 0n, globalPosition: 0n };
      return { nextExpectedRevision: length - 1n, position };
    });
    // The wake-up goes out after the commit, not inside it: a NOTIFY in the
    // transaction takes a database-wide lock through the commit's WAL flush,
    // which serialises every appender. It is only a hint (readers also poll),
    // so a lost one costs latency, never an event.
    if (events.length > 0) {
      this.db.query('SELECT pg_notify($1, $2)', [EVENTS_CHANNEL, streamId]).catch(() => undefined);
    }
    return result;
  }

  async readStream(streamId: string, options: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    const { rows } = await this.db.pool.query<EventRow>(
      `SELECT ${EVENT_COLUMNS} FROM kl_events
        WHERE stream_id = $1 AND stream_revision >= $2
        ORDER BY stream_revision
        LIMIT $3`,
      [streamId, (options.fromRevision ?? 0n).toString(), options.maxCount ?? null],
    );
    return rows.map(toRecordedEvent);
  }

  readAll(from: LogPosition, limit: number): Promise<RecordedEvent[]> {
    return readLogAfter(this.db.pool, from, limit);
  }

  async *subscribe(from: LogPosition, signal: AbortSignal): AsyncIterable<RecordedEvent> {
    let position = from;
    const batchSize = 1000;
    while (!signal.aborted) {
      const batch = await this.readAll(position, batchSize);
      for (const event of batch) {
        if (signal.aborted) return;
        yield event;
        position = event.position;
      }
      if (batch.length < batchSize) await this.notifier.wait(EVENTS_CHANNEL, 250, signal);
    }
  }
}

function jsonLines(values: unknown[]): string {
  return values
    .map((v) => {
      const line = JSON.stringify(v);
      // Only a value JSON cannot spell (undefined, a function) has no text.
      if (line === undefined) throw new TypeError('event data and metadata must be JSON values');
      return line;
    })
    .join('\n');
}

/**
 * Moves the stream's length forward by `count` iff the expectation holds, and
 * returns the new length. The row lock taken here serialises writers of one
 * stream; a loser re-evaluates the condition after the winner commits.
 */
async function advanceStream(
  tx: PoolClient,
  streamId: string,
  count: bigint,
  expected: ExpectedRevision,
): Promise<bigint> {
  const n = count.toString();
  let rows: { length: string }[];
  if (expected === 'no_stream') {
    ({ rows } = await tx.query(
      `INSERT INTO kl_streams (stream_id, length) VALUES ($1, $2)
       ON CONFLICT (stream_id) DO NOTHING RETURNING length`,
      [streamId, n],
    ));
  } else if (expected === 'any') {
    ({ rows } = await tx.query(
      `INSERT INTO kl_streams (stream_id, length) VALUES ($1, $2)
       ON CONFLICT (stream_id) DO UPDATE
         SET length = kl_streams.length + EXCLUDED.length, updated_at = now()
       RETURNING length`,
      [streamId, n],
    ));
  } else if (expected === 'stream_exists') {
    ({ rows } = await tx.query(
      `UPDATE kl_streams SET length = length + $2, updated_at = now()
        WHERE stream_id = $1 RETURNING length`,
      [streamId, n],
    ));
  } else {
    ({ rows } = await tx.query(
      `UPDATE kl_streams SET length = length + $2, updated_at = now()
        WHERE stream_id = $1 AND length = $3 RETURNING length`,
      [streamId, n, (expected + 1n).toString()],
    ));
  }
  if (rows.length === 1) return BigInt(rows[0].length);
  const actual = await tx.query<{ length: string }>(
    'SELECT length FROM kl_streams WHERE stream_id = $1',
    [streamId],
  );
  const actualText = actual.rows.length
    ? (BigInt(actual.rows[0].length) - 1n).toString()
    : 'no_stream';
  throw new WrongExpectedRevisionError(streamId, String(expected), actualText);
}
