import { createHash } from 'node:crypto';
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

/**
 * `stateDocumentBytes` cut into chunks at instance boundaries chosen by the
 * instances' own content (their digest), not by their position: a commit
 * that changes, adds or removes a few instances changes only the chunks
 * around them, the others keep their ids and need not be written again.
 * Concatenated in order, the chunks are exactly `stateDocumentBytes(doc)`.
 * A chunk's id hashes its separator text and its instances' digests (never
 * the whole bytes again), so an unchanged instance costs no hashing.
 */
export function documentChunks(doc: StateDocumentV4, encoding: InstanceEncoding): DocumentChunk[] {
  // Each separator's bytes with their frame, made once per distinct separator.
  const separators = new Map<string, { bytes: Buffer; frame: Buffer }>();
  const chunks: DocumentChunk[] = [];
  let hash = createHash('sha256');
  let parts: Buffer[] = [];
  let size = 0;
  const cut = () => {
    chunks.push({ id: hash.digest('hex'), parts, size });
    hash = createHash('sha256');
    parts = [];
    size = 0;
  };
  for (const part of documentParts(doc)) {
    if (typeof part === 'string') {
      let separator = separators.get(part);
      if (separator === undefined) {
        const bytes = Buffer.from(part, 'utf8');
        separators.set(part, (separator = { bytes, frame: frame(0, bytes.length) }));
      }
      // Type and length first: no run of separators and digests reads as another.
      hash.update(separator.frame).update(separator.bytes);
      parts.push(separator.bytes);
      size += separator.bytes.length;
      continue;
    }
    const bytes = encoding.bytes(part);
    const digest = encoding.digest(part);
    hash.update(digest.length === DIGEST_BYTES ? DIGEST_FRAME : frame(1, digest.length));
    hash.update(digest);
    parts.push(bytes);
    size += bytes.length;
    if (digest[0] < BOUNDARY_BELOW || size >= MAX_CHUNK_BYTES) cut();
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
  return createHash('sha256').update(bytes).digest();
}
