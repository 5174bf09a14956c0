/** Entries of a long list per piece of JSON text: about a millisecond of work. */
export const PIECE_ENTRIES = 1000;

/**
 * `JSON.stringify([...entries])` in pieces of PIECE_ENTRIES entries, each
 * written when it is asked for: a writer can let other work run between
 * pieces of a snapshot holding tens of thousands of entries.
 */
export function* jsonListPieces(entries: Iterable<unknown>): Generator<string> {
  let piece: unknown[] = [];
  let open = '[';
  for (const entry of entries) {
    piece.push(entry);
    if (piece.length === PIECE_ENTRIES) {
      yield open + JSON.stringify(piece).slice(1, -1);
      open = ',';
      piece = [];
    }
  }
  yield piece.length > 0
    ? `${open}${JSON.stringify(piece).slice(1, -1)}]`
    : open === '['
      ? '[]'
      : ']';
}

/** `items` each mapped by `f`, lazily: the entries of a list written in pieces. */
export function* mapped<T, U>(items: Iterable<T>, f: (item: T) => U): Generator<U> {
  for (const item of items) yield f(item);
}
