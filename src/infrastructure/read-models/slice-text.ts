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
 * Pages of 1,024 instances or 1 MiB stored, pieces of 1 MiB: kld holds two
 * pages (one written, the next read) and a piece or two of text per slice,
 * not the slice (a 20,000-instance slice built whole held ~60 MB while it was
 * written). Pages of 256 held a third less at 1 and 4 slices at once, the
 * same at 10, and took one slice alone 2.4× as long (80 round trips against
 * 20: docs/performance-history.md, wave 24).
 */
export const SLICE_PAGING: SlicePaging = {
  rows: 1024,
  bytes: 1024 * 1024,
  pieceChars: 1024 * 1024,
};

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
  const read = (from: number): NextPage | null => {
    const { stubs, end } = pageFrom(parts, from, keys, paging);
    if (stubs.length === 0) return null;
    const page = readPage(q, stateId, stubs, keys);
    // Read ahead, maybe never awaited (the reader went): its failure is not unhandled.
    page.catch(() => undefined);
    return { first: stubs[0], end, page };
  };
  let page = new Map<InstanceObjectV4, string>();
  let next: NextPage | null = null;
  let piece: string[] = [];
  let size = 0;
  for (let at = 0; at < parts.length; at++) {
    const part = parts[at];
    let text: string;
    if (typeof part === 'string') text = part;
    else {
      let written = page.get(part);
      if (written === undefined) {
        const current: NextPage = next?.first === part ? next : read(at)!;
        page = await current.page;
        // The next page is read while this one is written: one round trip less to wait for.
        next = read(current.end);
        written = page.get(part)!;
      }
      text = written;
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

interface NextPage {
  first: InstanceObjectV4;
  /** The index in the parts just past the page's last instance. */
  end: number;
  page: Promise<Map<InstanceObjectV4, string>>;
}

/** The stand-ins of the page that starts at `parts[at]`, in document order. */
function pageFrom(
  parts: readonly (string | InstanceObjectV4)[],
  at: number,
  keys: ReadonlyMap<InstanceObjectV4, SliceRowKey>,
  paging: SlicePaging,
): { stubs: InstanceObjectV4[]; end: number } {
  const stubs: InstanceObjectV4[] = [];
  let bytes = 0;
  let end = at;
  for (let i = at; i < parts.length && stubs.length < paging.rows; i++) {
    const part = parts[i];
    if (typeof part === 'string') continue;
    const stored = keys.get(part)!.stored;
    if (stubs.length > 0 && bytes + stored > paging.bytes) break;
    stubs.push(part);
    bytes += stored;
    end = i + 1;
  }
  return { stubs, end };
}

async function readPage(
  q: Queryable,
  stateId: string,
  stubs: InstanceObjectV4[],
  keys: ReadonlyMap<InstanceObjectV4, SliceRowKey>,
): Promise<Map<InstanceObjectV4, string>> {
  const wanted = stubs.map((s) => keys.get(s)!);
  // One primary-key lookup per instance, (state_id, address, create_version): a LATERAL
  // subquery fenced by OFFSET 0. As a join, the planner hashed the state's every row for
  // each page (39 ms against 4 ms for 1,000 instances of a 20,000-instance state).
  const { rows } = await q.query<{ address: string; instance: InstanceObjectV4 }>(
    `SELECT r.address, r.instance
       FROM unnest($2::text[], $3::integer[]) AS k(address, create_version)
       CROSS JOIN LATERAL (
         SELECT r.address, r.instance FROM resources r
          WHERE r.state_id = $1 AND r.address = k.address AND r.create_version = k.create_version
         OFFSET 0) r`,
    [stateId, wanted.map((k) => k.address), wanted.map((k) => k.createVersion)],
  );
  // Written at once: the objects parsed die young, while the page's text (flat
  // strings) waits for its turn to be written; objects that waited for a reader
  // to drain outlived the young generation, and ten slices at once grew kld's heap.
  const byAddress = new Map(rows.map((r) => [r.address, r.instance]));
  const page = new Map<InstanceObjectV4, string>();
  stubs.forEach((stub, i) => {
    const object = byAddress.get(wanted[i].address);
    if (object === undefined) {
      throw new Error(`the slice's instance ${wanted[i].address} is no longer stored`);
    }
    page.set(stub, instanceObjectText(object));
  });
  return page;
}
