import * as os from 'node:os';
import type { LRUCache } from 'lru-cache';
import {
  documentInstances,
  InstanceBytes,
  instanceBytesOf,
  InstanceObjectV4,
  parseStateBodyReusing,
  parseStateDocument,
  StateDocumentV4,
} from '../../domain/terraform';
import { boundedCache, DEFAULT_CACHE_BUDGETS } from '../bounded-cache';

/** Bodies from this size up are read into a buffer the memo recycles; smaller ones are cheap. */
const RECYCLED_FROM = 1 << 20;

interface Entry {
  body: Buffer;
  /**
   * The body's instances with their spans; for a body parsed whole, found
   * when the next body of the state comes (`instancesOf`), from `parsed`.
   */
  instances?: InstanceBytes;
  /** The document and its instance objects as parsed (what the spans will be of). */
  parsed?: { document: StateDocumentV4; objects: InstanceObjectV4[] };
  /** Instances held (the entry's weight in the budget). */
  count: number;
  /** A body buffer of this state that no entry holds any more: the next body is read into it. */
  spare?: Buffer;
}

/**
 * The bytes and instance objects of each state's last received document, so
 * that parsing the next one decodes and parses only the instances whose
 * bytes changed (parseStateBodyReusing). Equal bytes are an equal parse, so
 * an entry can go stale but never lie; entries are kept whether or not the
 * commit is accepted. Bounded by instances held (the `hashInstances` budget),
 * least recently received state first out; an entry keeps its body alive,
 * and for a big body one more buffer of its size: the body before it, which
 * the next body is read into (`bodyBuffer`), so a state's bodies do not each
 * cost a fresh allocation of their size (its page faults and the garbage).
 * That spare is kept only while there is room for it (`roomFor`, by default
 * `roomInMemory`): when memory is short, the next body costs an allocation.
 * Whether there is room is asked once the parse has returned (the next turn
 * of the event loop, while the commit waits for PostgreSQL), not on the
 * commit's own path: reading the process's memory is a system call that now
 * and then takes milliseconds.
 *
 * A body parsed whole (a state's first commit, or one after the memo let it
 * go) has its instances' spans found only when the state's next body comes:
 * with `served` (the served bytes the raw-state projector makes of each
 * instance anyway, ServedInstanceBytes), by comparing the body with the
 * document as served, which is what terraform writes, instead of scanning
 * it (instanceBytesOf): a first commit of a big state does neither, and
 * the next one compares (docs/performance-history.md, "The first commit of a wide
 * state (wave 16)").
 */
export class DocumentTextMemo {
  private readonly states: LRUCache<string, Entry>;
  /** The backing stores this memo allocated: only those are ever recycled. */
  private readonly own = new WeakSet<ArrayBufferLike>();
  private readonly roomFor: (bytes: number) => boolean;
  private readonly served?: (instance: InstanceObjectV4) => Buffer;

  constructor(
    options: {
      maxInstances?: number;
      roomFor?: (bytes: number) => boolean;
      served?: (instance: InstanceObjectV4) => Buffer;
    } = {},
  ) {
    this.states = boundedCache<Entry>(
      options.maxInstances ?? DEFAULT_CACHE_BUDGETS.hashInstances,
      (entry) => entry.count,
    );
    this.roomFor = options.roomFor ?? roomInMemory;
    this.served = options.served;
  }

  /**
   * A buffer of `size` bytes to read the next body of `key` into: the state's
   * spare one when it is big enough (handed out once: a second body read at
   * the same time gets its own), else a new one with room to grow.
   */
  bodyBuffer(key: string, size: number): Buffer {
    const entry = this.states.peek(key);
    const spare = entry?.spare;
    if (spare !== undefined) {
      entry!.spare = undefined;
      if (spare.length >= size) return spare.subarray(0, size);
    }
    if (size < RECYCLED_FROM) return Buffer.allocUnsafe(size);
    // Terraform's next document is usually a little longer (serials, added instances).
    const fresh = Buffer.allocUnsafeSlow(size + (size >> 4));
    this.own.add(fresh.buffer);
    return fresh.subarray(0, size);
  }

  /**
   * `parseStateDocument(decode(body))` for a document sent to `key` (the
   * state's stream); `decode` checks and decodes the whole body, and words
   * its refusals. `body` must not be used by the caller once this returned:
   * it may be kept, and the body it replaces recycled.
   */
  parse(key: string, body: Buffer, decode: (body: Buffer) => string): StateDocumentV4 {
    const before = this.states.get(key);
    const previous = before === undefined ? undefined : this.instancesOf(before);
    let document: StateDocumentV4;
    let entry: Entry | undefined;
    if (previous === undefined || previous.spans.length === 0) {
      // Nothing to reuse: one JSON.parse of the whole beats one per instance.
      document = parseStateDocument(decode(body));
      const objects = documentInstances(document);
      if (objects.length > 0)
        entry = { body, parsed: { document, objects }, count: objects.length };
    } else {
      const reused = parseStateBodyReusing(body, previous, decode);
      document = reused.document;
      if (reused.instances.spans.length > 0) {
        entry = { body, instances: reused.instances, count: reused.instances.spans.length };
      }
    }
    if (entry !== undefined) {
      // The body it replaces is held by nothing else now (the parse copied
      // what it kept out of it).
      const old = before?.body.buffer;
      entry.spare =
        old !== undefined && old !== body.buffer && this.own.has(old)
          ? Buffer.from(old)
          : before?.spare;
      this.states.set(key, entry);
      const spare = entry.spare;
      if (spare !== undefined) setImmediate(() => this.dropWithoutRoom(entry, spare));
    }
    return document;
  }

  /** The entry's instances with their spans, found now for a body that was parsed whole. */
  private instancesOf(entry: Entry): InstanceBytes {
    if (entry.instances === undefined) {
      const { document, objects } = entry.parsed!;
      entry.instances = instanceBytesOf(entry.body, document, this.served, objects);
      entry.parsed = undefined;
    }
    return entry.instances;
  }

  /** Lets `spare` go unless there is room to keep it (if no body was read into it meanwhile). */
  private dropWithoutRoom(entry: Entry, spare: Buffer): void {
    if (entry.spare === spare && !this.roomFor(spare.buffer.byteLength)) entry.spare = undefined;
  }
}

let usableMemory: number | undefined;

/**
 * Can kld keep `bytes` more resident? Yes while it would stay under half the
 * memory it may use: its control group's limit where it has one, else the
 * machine's.
 */
export function roomInMemory(bytes: number): boolean {
  // The limit is read once: the control group's is read from its files.
  if (usableMemory === undefined) {
    const constrained = process.constrainedMemory?.() ?? 0;
    const total = os.totalmem();
    usableMemory = constrained > 0 && constrained < total ? constrained : total;
  }
  return process.memoryUsage.rss() + bytes <= usableMemory / 2;
}
