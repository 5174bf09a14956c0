import { createHash } from 'node:crypto';
import { sha256Bytes } from './canonical-hash';
import { InstanceObjectV4, StateDocumentV4 } from './state-document';
import { documentParts } from './state-document-text';

/** A run of a served document's bytes, named by what it holds. */
export interface DocumentChunk {
  /** Hex SHA-256 over the chunk's separators and its instances' digests. */
  id: string;
  /** The chunk's bytes, in order: concatenated, they are the chunk. */
  parts: Buffer[];
  /** Sum of the parts' lengths. */
  size: number;
}

/** How a caller encodes (and may cache) an instance object's served bytes and their digest. */
export interface InstanceEncoding {
  bytes(instance: InstanceObjectV4): Buffer;
  /** SHA-256 of `bytes(instance)`. */
  digest(instance: InstanceObjectV4): Buffer;
}

/** A chunk ends after an instance whose digest's first byte is below this: 1 in 64. */
const BOUNDARY_BELOW = 4;
/** …or once it holds this many bytes, so one huge run of instances cannot make a huge chunk. */
const MAX_CHUNK_BYTES = 1 << 20;

/** A chunk as documentChunks named it: its parts (separator texts and instance objects) and id. */
interface NamedChunk {
  items: (string | InstanceObjectV4)[];
  id: string;
}

/**
 * The chunks documentChunks named last, by their last instance object, so
 * that a chunk made of the very same separators and instance objects keeps
 * its id without being hashed again: a delta then hashes only the chunks
 * around what it changed. Instance objects are never changed once parsed
 * (a changed instance is a new object), so the same items mean the same
 * bytes and digests, hence the same id. Entries go with their objects.
 */
export class ChunkNames {
  private readonly byLast = new WeakMap<InstanceObjectV4, NamedChunk>();

  /** The id named before for exactly these items, else undefined. */
  known(items: (string | InstanceObjectV4)[]): string | undefined {
    const last = lastInstance(items);
    const named = last === undefined ? undefined : this.byLast.get(last);
    if (named === undefined || named.items.length !== items.length) return undefined;
    for (let i = 0; i < items.length; i++) if (named.items[i] !== items[i]) return undefined;
    return named.id;
  }

  remember(items: (string | InstanceObjectV4)[], id: string): void {
    const last = lastInstance(items);
    if (last !== undefined) this.byLast.set(last, { items, id });
  }
}

function lastInstance(items: (string | InstanceObjectV4)[]): InstanceObjectV4 | undefined {
  for (let i = items.length - 1; i >= 0; i--) {
    const item = items[i];
    if (typeof item !== 'string') return item;
  }
  return undefined;
}

/**
 * `stateDocumentBytes` cut into chunks at instance boundaries chosen by the
 * instances' own content (their digest), not by their position: a commit
 * that changes, adds or removes a few instances changes only the chunks
 * around them, the others keep their ids and need not be written again.
 * Concatenated in order, the chunks are exactly `stateDocumentBytes(doc)`.
 * A chunk's id hashes its separator text and its instances' digests (never
 * the whole bytes again), so an unchanged instance costs no hashing; with
 * `names` (kept from the last call), an unchanged chunk costs none either.
 */
export function documentChunks(
  doc: StateDocumentV4,
  encoding: InstanceEncoding,
  names?: ChunkNames,
): DocumentChunk[] {
  // Each separator's bytes with their frame, made once per distinct separator.
  const separators = new Map<string, { bytes: Buffer; frame: Buffer }>();
  const separator = (text: string) => {
    let s = separators.get(text);
    if (s === undefined) {
      const bytes = Buffer.from(text, 'utf8');
      separators.set(text, (s = { bytes, frame: frame(0, bytes.length) }));
    }
    return s;
  };
  const chunks: DocumentChunk[] = [];
  let items: (string | InstanceObjectV4)[] = [];
  let parts: Buffer[] = [];
  let size = 0;
  const cut = () => {
    let id = names?.known(items);
    if (id === undefined) {
      const hash = createHash('sha256');
      for (const item of items) {
        if (typeof item === 'string') {
          // Type and length first: no run of separators and digests reads as another.
          const s = separator(item);
          hash.update(s.frame).update(s.bytes);
        } else {
          const digest = encoding.digest(item);
          hash.update(digest.length === DIGEST_BYTES ? DIGEST_FRAME : frame(1, digest.length));
          hash.update(digest);
        }
      }
      id = hash.digest('hex');
      names?.remember(items, id);
    }
    chunks.push({ id, parts, size });
    items = [];
    parts = [];
    size = 0;
  };
  for (const part of documentParts(doc)) {
    items.push(part);
    if (typeof part === 'string') {
      const { bytes } = separator(part);
      parts.push(bytes);
      size += bytes.length;
      continue;
    }
    const bytes = encoding.bytes(part);
    parts.push(bytes);
    size += bytes.length;
    if (encoding.digest(part)[0] < BOUNDARY_BELOW || size >= MAX_CHUNK_BYTES) cut();
  }
  if (parts.length > 0) cut();
  return chunks;
}

const DIGEST_BYTES = 32;
const DIGEST_FRAME = frame(1, DIGEST_BYTES);

function frame(kind: number, length: number): Buffer {
  const b = Buffer.allocUnsafe(5);
  b.writeUInt8(kind, 0);
  b.writeUInt32BE(length, 1);
  return b;
}

/** SHA-256 of an instance's served bytes, as `InstanceEncoding.digest` answers. */
export function instanceDigest(bytes: Buffer): Buffer {
  return sha256Bytes(bytes);
}
