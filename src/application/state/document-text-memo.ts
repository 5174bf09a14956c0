import type { LRUCache } from 'lru-cache';
import { InstanceTexts, parseStateDocumentReusing, StateDocumentV4 } from '../../domain/terraform';
import { boundedCache, DEFAULT_CACHE_BUDGETS } from '../bounded-cache';

/**
 * The instance objects of each state's last received document, with their
 * exact text, so that parsing the next one parses only the instances whose
 * text changed (parseStateDocumentReusing). Equal text is an equal parse, so
 * an entry can go stale but never lie; entries are kept whether or not the
 * commit is accepted. Bounded by instances held (the `hashInstances` budget),
 * least recently received state first out; an entry keeps its document's text
 * alive (the keys are slices of it).
 */
export class DocumentTextMemo {
  private readonly states: LRUCache<string, InstanceTexts>;

  constructor(options: { maxInstances?: number } = {}) {
    this.states = boundedCache<InstanceTexts>(
      options.maxInstances ?? DEFAULT_CACHE_BUDGETS.hashInstances,
      (instances) => instances.texts.length,
    );
  }

  /** parseStateDocument for a document sent to `key` (the state's stream). */
  parse(key: string, text: string): StateDocumentV4 {
    const { document, instances } = parseStateDocumentReusing(text, this.states.get(key));
    if (instances.texts.length > 0) this.states.set(key, instances);
    return document;
  }
}
