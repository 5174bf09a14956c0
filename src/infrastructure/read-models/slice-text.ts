import {
  documentParts,
  instanceObjectText,
  InstanceObjectV4,
  StateDocumentV4,
} from '../../domain/terraform';
import type { Queryable } from '../postgres/database';

/** A slice's instance as its `resources` row is keyed, known before its object is read. */
export interface SliceRowKey {
  address: string;
  createVersion: number;
  /** What PostgreSQL stores of the object (pg_column_size): the page's estimate. */
  stored: number;
}

/** How much of a slice is read from PostgreSQL at once and written in one piece. */
export interface SlicePaging {
  /** Instances per page read at most. */
  rows: number;
  /** Stored bytes of the instances per page read, at most (a page holds one instance at least). */
  bytes: number;
  /** Characters per piece written (the last one may be shorter). */
  pieceChars: number;
}

/**
 * Pages of 1,000 instances or 1 MiB stored, pieces of 1 MiB: kld holds a page
 * of objects and a piece or two of text per slice, not the slice (a
 * 20,000-instance slice built whole held ~60 MB while it was written).
 */
export const SLICE_PAGING: SlicePaging = { rows: 1000, bytes: 1 << 20, pieceChars: 1 << 20 };

/**
 * The text of `skeleton` (stateDocumentText), whose instance objects are
 * stand-ins that only sort as the real ones do (`index_key`, `deposed`):
 * each is read when its page comes, by its `resources` key, which names one
 * lifecycle and so one object however the state moves on meanwhile (a
 * lifecycle's object is never rewritten: a change opens another), so the
 * document is of the version the keys were read at. Throws if a key reads
 * nothing (the caller cuts the answer off rather than serve a wrong one).
 */
export async function* sliceText(
  q: Queryable,
  stateId: string,
  skeleton: StateDocumentV4,
  keys: ReadonlyMap<InstanceObjectV4, SliceRowKey>,
  paging: SlicePaging = SLICE_PAGING,
): AsyncGenerator<string> {
  const parts = documentParts(skeleton);
  let page = new Map<InstanceObjectV4, InstanceObjectV4>();
  let piece: string[] = [];
  let size = 0;
  for (let at = 0; at < parts.length; at++) {
    const part = parts[at];
    let text: string;
    if (typeof part === 'string') text = part;
    else {
      let object = page.get(part);
      if (object === undefined) {
        page = await readPage(q, stateId, pageFrom(parts, at, keys, paging), keys);
        object = page.get(part)!;
      }
      text = instanceObjectText(object);
    }
    piece.push(text);
    size += text.length;
    if (size >= paging.pieceChars) {
      yield piece.join('');
      piece = [];
      size = 0;
    }
  }
  if (piece.length > 0) yield piece.join('');
}

/** The stand-ins of the page that starts at `parts[at]`, in document order. */
function pageFrom(
  parts: readonly (string | InstanceObjectV4)[],
  at: number,
  keys: ReadonlyMap<InstanceObjectV4, SliceRowKey>,
  paging: SlicePaging,
): InstanceObjectV4[] {
  const stubs: InstanceObjectV4[] = [];
  let bytes = 0;
  for (let i = at; i < parts.length && stubs.length < paging.rows; i++) {
    const part = parts[i];
    if (typeof part === 'string') continue;
    const stored = keys.get(part)!.stored;
    if (stubs.length > 0 && bytes + stored > paging.bytes) break;
    stubs.push(part);
    bytes += stored;
  }
  return stubs;
}

async function readPage(
  q: Queryable,
  stateId: string,
  stubs: InstanceObjectV4[],
  keys: ReadonlyMap<InstanceObjectV4, SliceRowKey>,
): Promise<Map<InstanceObjectV4, InstanceObjectV4>> {
  const wanted = stubs.map((s) => keys.get(s)!);
  // One primary-key lookup per instance: (state_id, address, create_version).
  const { rows } = await q.query<{ address: string; instance: InstanceObjectV4 }>(
    `SELECT r.address, r.instance
       FROM unnest($2::text[], $3::integer[]) AS k(address, create_version)
       JOIN resources r
         ON r.state_id = $1 AND r.address = k.address AND r.create_version = k.create_version`,
    [stateId, wanted.map((k) => k.address), wanted.map((k) => k.createVersion)],
  );
  const byAddress = new Map(rows.map((r) => [r.address, r.instance]));
  const page = new Map<InstanceObjectV4, InstanceObjectV4>();
  stubs.forEach((stub, i) => {
    const object = byAddress.get(wanted[i].address);
    if (object === undefined) {
      throw new Error(`the slice's instance ${wanted[i].address} is no longer stored`);
    }
    page.set(stub, object);
  });
  return page;
}
