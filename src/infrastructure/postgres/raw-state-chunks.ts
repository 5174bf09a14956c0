import type { Queryable } from './database';

/** A state's row of `raw_state` with its document assembled from `raw_state_chunks`. */
export interface StoredRawState {
  version: number;
  /** The manifest: chunk ids in document order; null before the first write. */
  chunks: string[] | null;
  /** The served bytes; null before the first write. */
  bytes: Buffer | null;
}

/** A state's row of `raw_state` with the bytes of each chunk its manifest lists, in order. */
export interface StoredRawStateParts {
  version: number;
  /** The manifest: chunk ids in document order; null before the first write. */
  chunks: string[] | null;
  /** Each chunk's bytes, in the manifest's order; null before the first write. */
  parts: Buffer[] | null;
}

/**
 * Reads the row and the chunks its manifest lists in one statement, so in
 * one snapshot: a commit that replaces chunks meanwhile is seen whole or not
 * at all. The manifest comes once, in its own row: repeated on every chunk's
 * row (a join), a 100,000-instance state's 1,500 ids would travel and be
 * parsed 1,500 times. Null when the state has no row.
 */
export async function readRawStateParts(
  q: Queryable,
  stateId: string,
): Promise<StoredRawStateParts | null> {
  const { rows } = await q.query<{
    version: number | null;
    chunks: string[] | null;
    chunk_id: string | null;
    bytes: Buffer | null;
  }>(
    `WITH r AS (SELECT version, chunks FROM raw_state WHERE state_id = $1)
     SELECT r.version, r.chunks, NULL::text AS chunk_id, NULL::bytea AS bytes FROM r
     UNION ALL
     SELECT NULL, NULL, c.chunk_id, c.bytes
       FROM r JOIN raw_state_chunks c ON c.state_id = $1 AND c.chunk_id = ANY (r.chunks)`,
    [stateId],
  );
  const row = rows.find((x) => x.chunk_id === null);
  if (row === undefined) return null;
  const version = row.version!;
  const { chunks } = row;
  if (chunks === null) return { version, chunks, parts: null };
  const found = new Map<string, Buffer>();
  for (const x of rows) if (x.chunk_id !== null) found.set(x.chunk_id, x.bytes!);
  const parts = chunks.map((id) => {
    const bytes = found.get(id);
    if (bytes === undefined) {
      throw new Error(`raw_state of ${stateId} version ${version} lacks its chunk ${id}`);
    }
    return bytes;
  });
  return { version, chunks, parts };
}

/** readRawStateParts with the parts joined into the document. */
export async function readRawState(q: Queryable, stateId: string): Promise<StoredRawState | null> {
  const stored = await readRawStateParts(q, stateId);
  if (stored === null) return null;
  const { version, chunks, parts } = stored;
  return { version, chunks, bytes: parts === null ? null : Buffer.concat(parts) };
}

/**
 * The bytes of the chunks `ids` of a state that are stored now. A chunk's id
 * names its content, so its bytes never change; an id a later commit has
 * deleted is simply absent from the answer.
 */
export async function readChunks(
  q: Queryable,
  stateId: string,
  ids: readonly string[],
): Promise<Map<string, Buffer>> {
  const { rows } = await q.query<{ chunk_id: string; bytes: Buffer }>(
    `SELECT chunk_id, bytes FROM raw_state_chunks WHERE state_id = $1 AND chunk_id = ANY ($2)`,
    [stateId, ids],
  );
  return new Map(rows.map((r) => [r.chunk_id, r.bytes]));
}
