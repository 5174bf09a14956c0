import type { LRUCache } from 'lru-cache';
import { InstanceBytes, parseStateBodyReusing, StateDocumentV4 } from '../../domain/terraform';
import { boundedCache, DEFAULT_CACHE_BUDGETS } from '../bounded-cache';

/**
 * The bytes and instance objects of each state's last received document, so
 * that parsing the next one decodes and parses only the instances whose
 * bytes changed (parseStateBodyReusing). Equal bytes are an equal parse, so
 * an entry can go stale but never lie; entries are kept whether or not the
 * commit is accepted. Bounded by instances held (the `hashInstances` budget),
 * least recently received state first out; an entry keeps its body alive.
 */
export class DocumentTextMemo {
  private readonly states: LRUCache<string, InstanceBytes>;

  constructor(options: { maxInstances?: number } = {}) {
    this.states = boundedCache<InstanceBytes>(
      options.maxInstances ?? DEFAULT_CACHE_BUDGETS.hashInstances,
      (instances) => instances.spans.length,
    );
  }

  /**
   * `parseStateDocument(decode(body))` for a document sent to `key` (the
   * state's stream); `decode` checks and decodes the whole body, and words
   * its refusals.
   */
  parse(key: string, body: Buffer, decode: (body: Buffer) => string): StateDocumentV4 {
    const { document, instances } = parseStateBodyReusing(body, this.states.get(key), decode);
    if (instances.spans.length > 0) this.states.set(key, instances);
    return document;
  }
}
