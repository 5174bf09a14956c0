import type { LRUCache } from 'lru-cache';
import { boundedCache, DEFAULT_CACHE_BUDGETS } from '../bounded-cache';

/** A chunk's bytes as the raw-state projector made them: concatenated, they are the chunk. */
export interface ChunkBytes {
  parts: readonly Buffer[];
  size: number;
  /** The parts joined, once someone needed them so (the INSERT that wrote the chunk, a GET). */
  joined?: Buffer;
}

interface Written {
  chunks: ReadonlyMap<string, ChunkBytes>;
  size: number;
}

/**
 * The chunks of each state's document as this process's raw-state projector
 * wrote it last, by chunk id, so that the document read model takes them
 * from memory instead of reading them back from PostgreSQL: the GET right
 * after a commit otherwise reads every chunk it does not hold as hex text,
 * most of the document after a series of commits. A chunk's id names its
 * content, so the bytes under an id are the stored ones whether or not the
 * write that made them committed; the read model still asks the database
 * which ids are current. The parts are mostly the instances' served bytes,
 * which the projector's document cache keeps anyway, or the chunk joined
 * once the INSERT that wrote it or a GET needed it so (then shared with the
 * read model's copy). So a state's chunks are kept only while that cache
 * keeps its document (the projector forgets those it drops): kept longer,
 * they would hold those bytes beside the cache, up to this bound again
 * through a rebuild over many big states. The bound counts every chunk's
 * bytes (least recently written state out).
 */
export class WrittenChunks {
  private readonly byState: LRUCache<string, Written>;

  constructor(budgetBytes: number = DEFAULT_CACHE_BUDGETS.servedBytes) {
    this.byState = boundedCache<Written>(budgetBytes, (w) => w.size);
  }

  /**
   * The chunks of `stateId`'s document just written (all of them, not only
   * the new ones). A chunk written before keeps its entry, joined bytes and all.
   */
  remember(stateId: string, chunks: readonly ({ id: string } & ChunkBytes)[]): void {
    const before = this.byState.get(stateId)?.chunks;
    const byId = new Map<string, ChunkBytes>();
    let size = 0;
    for (const c of chunks) {
      // Joined, the chunk no longer holds its instances' bytes apart.
      const kept = c.joined ? { parts: [c.joined], size: c.size, joined: c.joined } : c;
      byId.set(c.id, before?.get(c.id) ?? kept);
      size += c.size;
    }
    this.byState.set(stateId, { chunks: byId, size });
  }

  /** Whether this process wrote `stateId`'s document last (and still keeps its chunks). */
  has(stateId: string): boolean {
    return this.byState.has(stateId);
  }

  /** A state deleted: its chunks are no longer anyone's. */
  forget(stateId: string): void {
    this.byState.delete(stateId);
  }

  /** The bytes of those of `ids` written last for `stateId`, each joined into one buffer. */
  take(stateId: string, ids: readonly string[]): Map<string, Buffer> {
    const found = new Map<string, Buffer>();
    const written = this.byState.get(stateId);
    if (written === undefined) return found;
    for (const id of ids) {
      const c = written.chunks.get(id);
      if (c !== undefined) found.set(id, joinedBytes(c));
    }
    return found;
  }
}

/** The chunk's bytes as one buffer, joined at most once. */
export function joinedBytes(c: ChunkBytes): Buffer {
  return (c.joined ??= Buffer.concat(c.parts, c.size));
}
