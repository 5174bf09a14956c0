import { MAX_JSON_DEPTH, nestsDeeperThan } from './json-limits';
import { parseJsonLossless } from './lossless-json';
import { parseStateDocument, validateStateDocument } from './parse-state-document';
import { InstanceObjectV4, StateDocumentV4 } from './state-document';

/** Where an instance object sits in a document's text: `text.slice(start, end)`. */
export interface InstanceSpan {
  start: number;
  end: number;
  /** The previous document's object of the same text, when the text was found there. */
  reuse?: InstanceObjectV4;
}

/** A document's instance objects in document order, each with its exact text. */
export interface InstanceTexts {
  texts: readonly string[];
  objects: readonly InstanceObjectV4[];
}

export interface ReusingParse {
  document: StateDocumentV4;
  /** This document's instances: what the next parse may reuse. */
  instances: InstanceTexts;
}

const NONE: InstanceTexts = { texts: [], objects: [] };

// An instance object is at depth 4: document, resources, a resource, instances.
const INSTANCE_DEPTH = 4;

/**
 * Parses and validates a state document like parseStateDocument, parsing
 * only the instance objects whose text is not in `previous`: terraform
 * rewrites the whole document on every persist, and most instances of a big
 * state come back byte for byte. Equal text is an equal parse (and was
 * accepted before), so the objects are shared with the previous document.
 *
 * A scan finds each instance's text without parsing it; the rest of the
 * document (with each instance replaced by its ordinal) is parsed and
 * validated in full, and every instance is validated again in its resource.
 * Any surprise, including any invalid document, falls back to
 * parseStateDocument itself, so the result and every refusal are exactly its.
 */
export function parseStateDocumentReusing(
  text: string,
  previous: InstanceTexts = NONE,
): ReusingParse {
  if (previous.texts.length === 0) {
    // Nothing to reuse: one JSON.parse of the whole beats one per instance.
    const document = parseStateDocument(text);
    return { document, instances: textsOf(text, document) };
  }
  const spans = instanceSpans(text, previous);
  if (spans !== null) {
    try {
      const reused = assemble(text, spans);
      if (reused !== null) return reused;
    } catch {
      // refused the way parseStateDocument words it, below
    }
  }
  const document = parseStateDocument(text);
  return { document, instances: NONE };
}

/** `text` with each span replaced by its ordinal. */
function skeletonText(text: string, spans: InstanceSpan[]): string {
  const parts: string[] = [];
  let from = 0;
  spans.forEach((span, k) => {
    parts.push(text.slice(from, span.start), String(k));
    from = span.end;
  });
  parts.push(text.slice(from));
  return parts.join('');
}

/** The text of each instance of `document`, parsed from `text`; none if the scan disagrees. */
function textsOf(text: string, document: StateDocumentV4): InstanceTexts {
  const spans = instanceSpans(text);
  if (spans === null) return NONE;
  let skeleton: unknown;
  try {
    skeleton = JSON.parse(skeletonText(text, spans));
  } catch {
    return NONE; // the scan cut the text where JSON.parse does not
  }
  if (!holdsOrdinals(skeleton, spans.length)) return NONE;
  const objects = document.resources.flatMap((r) => r.instances);
  return { texts: spans.map((span) => text.slice(span.start, span.end)), objects };
}

/**
 * Does every instance slot of the parsed skeleton hold the next ordinal, `count` in all?
 * Then the scan saw exactly the instances JSON.parse does, in its order.
 */
function holdsOrdinals(skeleton: unknown, count: number): boolean {
  const resources = (skeleton as { resources?: unknown }).resources;
  if (!Array.isArray(resources)) return false;
  let k = 0;
  for (const resource of resources) {
    const slots = (resource as { instances?: unknown } | null)?.instances;
    if (!Array.isArray(slots)) return false;
    for (const slot of slots) if (slot !== k++) return false;
  }
  return k === count;
}

function assemble(text: string, spans: InstanceSpan[]): ReusingParse | null {
  const skeleton = parseJsonLossless(skeletonText(text, spans));

  const texts = spans.map((span) => text.slice(span.start, span.end));
  const objects = spans.map((span, k) => {
    if (span.reuse !== undefined) return span.reuse;
    const value = parseJsonLossless(texts[k]);
    if (nestsDeeperThan(value, MAX_JSON_DEPTH - INSTANCE_DEPTH)) return null;
    return value as unknown as InstanceObjectV4;
  });

  if (!holdsOrdinals(skeleton, spans.length) || objects.includes(null)) return null;
  let k = 0;
  for (const resource of (skeleton as { resources: { instances: unknown[] }[] }).resources) {
    const slots = resource.instances;
    for (let j = 0; j < slots.length; j++) slots[j] = objects[k++];
  }
  return {
    document: validateStateDocument(skeleton),
    instances: { texts, objects: objects as InstanceObjectV4[] },
  };
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const COLON = 0x3a;
const COMMA = 0x2c;

const STRUCTURAL = /["{}[\]]/g;

class NotAState extends Error {}

/**
 * The text span of every element of `resources[*].instances` in a JSON
 * document, in document order, without parsing them; null when the text is
 * not shaped like a state document (the caller parses it in full then).
 * Member names are compared as written: an escaped or repeated name makes the
 * spans disagree with what JSON.parse sees, which the caller detects.
 *
 * An instance whose text is `previous`'s next one (or the one after: an
 * instance removed) is compared, not scanned: a native string comparison
 * instead of a walk through its strings and brackets.
 */
export function instanceSpans(text: string, previous: InstanceTexts = NONE): InstanceSpan[] | null {
  try {
    return new SpanScanner(text, previous).document();
  } catch (e) {
    if (e instanceof NotAState) return null;
    throw e;
  }
}

class SpanScanner {
  private at = 0;
  private readonly spans: InstanceSpan[] = [];
  /** The previous document's instance expected next. */
  private next = 0;

  constructor(
    private readonly text: string,
    private readonly previous: InstanceTexts,
  ) {}

  document(): InstanceSpan[] {
    this.members((name) => {
      if (name === 'resources') this.elements(() => this.resource());
      else this.skipValue();
    });
    this.space();
    if (this.at !== this.text.length) throw new NotAState();
    return this.spans;
  }

  private resource(): void {
    this.members((name) => {
      if (name !== 'instances') return this.skipValue();
      this.elements(() => {
        const start = this.at;
        const reuse = this.known(start);
        if (reuse === undefined) this.skipValue();
        this.spans.push({ start, end: this.at, reuse });
      });
    });
  }

  /** The previous document's object if its next instance's text starts here; moves past it. */
  private known(start: number): InstanceObjectV4 | undefined {
    const { texts, objects } = this.previous;
    for (let j = this.next; j < this.next + 2 && j < texts.length; j++) {
      // slice and === compare as memory; startsWith walks character by character.
      if (this.text.slice(start, start + texts[j].length) === texts[j]) {
        this.next = j + 1;
        this.at = start + texts[j].length;
        return objects[j];
      }
    }
    return undefined;
  }

  /** An object; `member` reads each value, the scanner standing at it. */
  private members(member: (name: string) => void): void {
    this.space();
    this.expect(OPEN_BRACE);
    this.space();
    if (this.peek() === CLOSE_BRACE) {
      this.at++;
      return;
    }
    for (;;) {
      this.space();
      const nameStart = this.at;
      this.skipString();
      const name = this.text.slice(nameStart + 1, this.at - 1);
      this.space();
      this.expect(COLON);
      this.space();
      member(name);
      this.space();
      if (this.peek() === COMMA) {
        this.at++;
        continue;
      }
      this.expect(CLOSE_BRACE);
      return;
    }
  }

  /** An array; `element` reads each element, the scanner standing at it. */
  private elements(element: () => void): void {
    this.expect(OPEN_BRACKET);
    this.space();
    if (this.peek() === CLOSE_BRACKET) {
      this.at++;
      return;
    }
    for (;;) {
      this.space();
      element();
      this.space();
      if (this.peek() === COMMA) {
        this.at++;
        continue;
      }
      this.expect(CLOSE_BRACKET);
      return;
    }
  }

  /** Any value, nested ones by counting brackets (no recursion: any depth). */
  private skipValue(): void {
    const c = this.peek();
    if (c === QUOTE) return this.skipString();
    if (c !== OPEN_BRACE && c !== OPEN_BRACKET) {
      const start = this.at;
      while (this.at < this.text.length && !isDelimiter(this.peek())) this.at++;
      if (this.at === start) throw new NotAState();
      return;
    }
    // Jump from one bracket or quote to the next: native search, not a loop per character.
    const structural = STRUCTURAL;
    let depth = 0;
    for (;;) {
      structural.lastIndex = this.at;
      const found = structural.exec(this.text);
      if (found === null) break;
      this.at = found.index;
      const d = this.text.charCodeAt(this.at);
      if (d === QUOTE) {
        this.skipString();
        continue;
      }
      this.at++;
      if (d === OPEN_BRACE || d === OPEN_BRACKET) depth++;
      else if (--depth === 0) return;
    }
    throw new NotAState();
  }

  private skipString(): void {
    this.expect(QUOTE);
    const text = this.text;
    for (;;) {
      const close = text.indexOf('"', this.at);
      if (close < 0) throw new NotAState();
      let backslashes = 0;
      while (text.charCodeAt(close - 1 - backslashes) === BACKSLASH) backslashes++;
      this.at = close + 1;
      if (backslashes % 2 === 0) return;
    }
  }

  private space(): void {
    const text = this.text;
    while (this.at < text.length) {
      const c = text.charCodeAt(this.at);
      if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return;
      this.at++;
    }
  }

  private peek(): number {
    return this.text.charCodeAt(this.at);
  }

  private expect(c: number): void {
    if (this.peek() !== c) throw new NotAState();
    this.at++;
  }
}

function isDelimiter(c: number): boolean {
  return (
    c === COMMA ||
    c === CLOSE_BRACE ||
    c === CLOSE_BRACKET ||
    c === 0x20 ||
    c === 0x0a ||
    c === 0x0d ||
    c === 0x09
  );
}
