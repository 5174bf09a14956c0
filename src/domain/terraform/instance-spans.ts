import { MAX_JSON_DEPTH, nestsDeeperThan } from './json-limits';
import { parseJsonLossless } from './lossless-json';
import { AddressBook, parseStateDocument, validateReusingDocument } from './parse-state-document';
import { InstanceObjectV4, StateDocumentV4 } from './state-document';
import { documentParts } from './state-document-text';

/** Where an instance object sits in a document's bytes: `body.subarray(start, end)`. */
export interface InstanceSpan {
  start: number;
  end: number;
  /** The previous document's object of the same bytes, when the bytes were found there. */
  reuse?: InstanceObjectV4;
  /** That object's position in the previous document. */
  from?: number;
  /** The position of the last instance of the same `instances` array. */
  last?: number;
}

/** A document's bytes as received, and its instance objects in document order with their spans. */
export interface InstanceBytes {
  body: Buffer;
  spans: readonly InstanceSpan[];
  objects: readonly InstanceObjectV4[];
  /** The instances' addresses, once a reusing parse checked them (for the next one). */
  addresses: AddressBook | null;
}

export interface ReusingParse {
  document: StateDocumentV4;
  /** This document's instances: what the next parse may reuse. */
  instances: InstanceBytes;
}

/** Refuses bytes that are not UTF-8 instead of replacing them; keeps a BOM, like Buffer#toString. */
const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The bytes as text, or null if they are not UTF-8. */
function utf8OrNull(bytes: Uint8Array): string | null {
  try {
    return STRICT_UTF8.decode(bytes);
  } catch {
    return null;
  }
}

const NONE: InstanceBytes = { body: Buffer.alloc(0), spans: [], objects: [], addresses: null };

// An instance object is at depth 4: document, resources, a resource, instances.
const INSTANCE_DEPTH = 4;

/**
 * Parses and validates a state document's bytes like
 * `parseStateDocument(decode(body))`, decoding and parsing only the instance
 * objects whose bytes are not in `previous`: terraform rewrites the whole
 * document on every persist, and most instances of a big state come back
 * byte for byte. Equal bytes are an equal parse (and were accepted before),
 * so those objects are shared with the previous document, and the body is
 * never decoded whole.
 *
 * A scan of the bytes finds each instance without parsing it, comparing it
 * with the previous document's next instance (memcmp); the rest of the
 * document (with each instance replaced by its ordinal) is decoded, parsed
 * and validated in full; a reused instance is checked again only where its
 * resource and neighbours matter (its address). `decode` is the full decoder (UTF-8 checked, refusals worded):
 * any surprise, including any invalid document or byte, falls back to
 * `parseStateDocument(decode(body))` itself, so the result and every refusal
 * are exactly its.
 */
export function parseStateBodyReusing(
  body: Buffer,
  previous: InstanceBytes = NONE,
  decode: (body: Buffer) => string = (b) => b.toString('utf8'),
): ReusingParse {
  if (previous.spans.length === 0) {
    // Nothing to reuse: one JSON.parse of the whole beats one per instance.
    const document = parseStateDocument(decode(body));
    return { document, instances: bytesOf(body, document) };
  }
  const spans = instanceSpans(body, previous);
  if (spans !== null) {
    try {
      const reused = assemble(body, spans, previous.addresses);
      if (reused !== null) return reused;
    } catch {
      // refused the way parseStateDocument words it, below
    }
  }
  const document = parseStateDocument(decode(body));
  return { document, instances: NONE };
}

/** `body` with each span replaced by its ordinal, as text; null if a byte is not UTF-8. */
function skeletonText(body: Buffer, spans: readonly InstanceSpan[]): string | null {
  let size = body.length;
  for (let k = 0; k < spans.length; k++) size += digits(k) - (spans[k].end - spans[k].start);
  const skeleton = Buffer.allocUnsafe(size);
  let at = 0;
  let from = 0;
  for (let k = 0; k < spans.length; k++) {
    const { start, end } = spans[k];
    // The text between two instances is a few bytes: a loop beats a native copy call.
    if (start - from <= 32) for (let b = from; b < start; b++) skeleton[at++] = body[b];
    else at += body.copy(skeleton, at, from, start);
    at += writeDigits(skeleton, at, k);
    from = end;
  }
  body.copy(skeleton, at, from);
  // Spans start at a value's first byte and end after its last: cutting there
  // never splits a UTF-8 sequence, so checking the joined parts checks each.
  return utf8OrNull(skeleton);
}

/** How many decimal digits `n` (a non-negative integer) has. */
function digits(n: number): number {
  let d = 1;
  while (n >= 10) {
    n = Math.floor(n / 10);
    d++;
  }
  return d;
}

/** Writes `n` in decimal ASCII at `at`; returns the number of bytes written. */
function writeDigits(into: Buffer, at: number, n: number): number {
  const d = digits(n);
  for (let i = d - 1; i >= 0; i--) {
    into[at + i] = 0x30 + (n % 10);
    n = Math.floor(n / 10);
  }
  return d;
}

/**
 * The span of each instance of `document`, parsed whole from `body`, for the
 * next reusing parse. With `served` (an instance's bytes as a served document
 * spells it, `instanceObjectText`, which its caller may have cached): when
 * `body` is byte for byte the document as kld serves it (terraform writes it
 * so: two-space indentation and a final newline), the spans are where that
 * spelling puts each instance, compared part by part rather than scanned.
 * Otherwise, or without `served`, the bytes are scanned (`instanceSpans`).
 * A full parse leaves this to the next body of its state: a first commit
 * then pays for neither.
 */
export function instanceBytesOf(
  body: Buffer,
  document: StateDocumentV4,
  served?: (instance: InstanceObjectV4) => Buffer,
  objects: readonly InstanceObjectV4[] = documentInstances(document),
): InstanceBytes {
  return (
    (served && laidOutAsServed(body, document, objects, served)) || bytesOf(body, document, objects)
  );
}

/** A document's instance objects in document order: what its spans are the bytes of. */
export function documentInstances(document: StateDocumentV4): InstanceObjectV4[] {
  return document.resources.flatMap((r) => r.instances);
}

/**
 * The spans of a body that is exactly the document as served, its instances
 * being `objects`; null if it is not.
 */
function laidOutAsServed(
  body: Buffer,
  document: StateDocumentV4,
  objects: readonly InstanceObjectV4[],
  served: (instance: InstanceObjectV4) => Buffer,
): InstanceBytes | null {
  const spans: InstanceSpan[] = [];
  let at = 0;
  for (const part of documentParts(document)) {
    if (typeof part === 'string') {
      // A separator is a few bytes, nearly always ASCII: compared here, where
      // a native call per separator would cost more than the comparing.
      if (at + part.length > body.length) return null;
      for (let i = 0; i < part.length; i++) {
        const c = part.charCodeAt(i);
        if (c >= 0x80 || body[at + i] !== c) return null; // not ASCII: scanned instead
      }
      at += part.length;
      continue;
    }
    if (part !== objects[spans.length]) return null;
    const bytes = served(part);
    const end = at + bytes.length;
    if (end > body.length || body.compare(bytes, 0, bytes.length, at, end) !== 0) return null;
    spans.push({ start: at, end });
    at = end;
  }
  if (at !== body.length || spans.length !== objects.length) return null;
  let k = 0;
  for (const r of document.resources) {
    const last = k + r.instances.length - 1;
    for (let i = 0; i < r.instances.length; i++) spans[k++].last = last;
  }
  return { body, spans, objects, addresses: null };
}

/** The span of each instance of `document`, parsed from `body`; none if the scan disagrees. */
function bytesOf(
  body: Buffer,
  document: StateDocumentV4,
  objects: readonly InstanceObjectV4[] = documentInstances(document),
): InstanceBytes {
  const spans = instanceSpans(body);
  if (spans === null) return NONE;
  let skeleton: unknown;
  try {
    const text = skeletonText(body, spans);
    if (text === null) return NONE;
    skeleton = JSON.parse(text);
  } catch {
    return NONE; // the scan cut the bytes where JSON.parse does not
  }
  if (!holdsOrdinals(skeleton, spans.length) || spans.length !== objects.length) return NONE;
  return { body, spans, objects, addresses: null };
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

function assemble(
  body: Buffer,
  spans: InstanceSpan[],
  book: AddressBook | null,
): ReusingParse | null {
  const text = skeletonText(body, spans);
  if (text === null) return null;
  const skeleton = parseJsonLossless(text);

  const objects: (InstanceObjectV4 | null)[] = [];
  for (const span of spans) {
    if (span.reuse !== undefined) {
      objects.push(span.reuse);
      continue;
    }
    const text = utf8OrNull(body.subarray(span.start, span.end));
    if (text === null) return null;
    const value = parseJsonLossless(text);
    if (nestsDeeperThan(value, MAX_JSON_DEPTH - INSTANCE_DEPTH)) return null;
    objects.push(value as unknown as InstanceObjectV4);
  }

  if (!holdsOrdinals(skeleton, spans.length)) return null;
  let k = 0;
  for (const resource of (skeleton as { resources: { instances: unknown[] }[] }).resources) {
    const slots = resource.instances;
    for (let j = 0; j < slots.length; j++) slots[j] = objects[k++];
  }
  const from = new Int32Array(spans.length);
  for (let k = 0; k < spans.length; k++) from[k] = spans[k].from ?? -1;
  const { document, book: addresses } = validateReusingDocument(skeleton, { from, book });
  return {
    document,
    instances: { body, spans, objects: objects as InstanceObjectV4[], addresses },
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

const RESOURCES = Buffer.from('resources', 'latin1');
const INSTANCES = Buffer.from('instances', 'latin1');

class NotAState extends Error {}

/** The fewest and most instances `SpanScanner.run` compares at once. */
const MIN_RUN = 2;
const MAX_RUN = 256;

/**
 * The byte span of every element of `resources[*].instances` in a JSON
 * document, in document order, without parsing them; null when the bytes are
 * not shaped like a state document (the caller parses it in full then).
 * Member names are compared as written: an escaped or repeated name makes the
 * spans disagree with what JSON.parse sees, which the caller detects. Every
 * byte this looks for is ASCII, and no byte of a multi-byte UTF-8 sequence
 * is, so the scan needs no decoding.
 *
 * An instance whose bytes are `previous`'s next one (or the one after: an
 * instance removed) is compared, not scanned: a memcmp instead of a walk
 * through its strings and brackets.
 */
export function instanceSpans(body: Buffer, previous: InstanceBytes = NONE): InstanceSpan[] | null {
  try {
    return new SpanScanner(body, previous).document();
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
    private readonly body: Buffer,
    private readonly previous: InstanceBytes,
  ) {}

  document(): InstanceSpan[] {
    this.members((name) => {
      if (name.equals(RESOURCES)) this.elements(() => this.resource());
      else this.skipValue();
    });
    this.space();
    if (this.at !== this.body.length) throw new NotAState();
    return this.spans;
  }

  private resource(): void {
    this.members((name) => {
      if (!name.equals(INSTANCES)) return this.skipValue();
      const first = this.spans.length;
      this.elements(() => {
        const start = this.at;
        if (this.run(start)) return;
        const from = this.known(start);
        if (from < 0) {
          this.skipValue();
          this.spans.push({ start, end: this.at });
        } else {
          this.spans.push({ start, end: this.at, reuse: this.previous.objects[from], from });
        }
      });
      const last = this.spans.length - 1;
      for (let k = first; k <= last; k++) this.spans[k].last = last;
    });
  }

  /** Instances compared at once by `run`: grows while runs match, shrinks when one does not. */
  private stride = MIN_RUN;

  /**
   * Several of the previous document's instances at once, when the bytes
   * here are those of the previous document's next instances of one array
   * and what lies between them (one memcmp instead of one per instance).
   * Those bytes were scanned in the same place before (an element of an
   * `instances` array), so a scan would find the same instances, moved by
   * the same offset. False (nothing moved) when no run of two or more matches.
   */
  private run(start: number): boolean {
    const { body: before, spans, objects } = this.previous;
    const j = this.next;
    if (j >= spans.length) return false;
    const last = spans[j].last;
    if (last === undefined) return false;
    for (let count = Math.min(this.stride, last - j + 1); count >= MIN_RUN; count >>= 1) {
      const from = spans[j].start;
      const to = spans[j + count - 1].end;
      const end = start + (to - from);
      if (end <= this.body.length && this.body.compare(before, from, to, start, end) === 0) {
        const shift = start - from;
        for (let k = j; k < j + count; k++) {
          const { start: a, end: b } = spans[k];
          this.spans.push({ start: a + shift, end: b + shift, reuse: objects[k], from: k });
        }
        this.next = j + count;
        this.at = end;
        this.stride = Math.min(count * 2, MAX_RUN);
        return true;
      }
      this.stride = Math.max(count >> 1, MIN_RUN);
    }
    return false;
  }

  /** The position of the previous document's instance whose bytes start here (moving past them), or -1. */
  private known(start: number): number {
    const { body: before, spans } = this.previous;
    for (let j = this.next; j < this.next + 2 && j < spans.length; j++) {
      const { start: from, end: to } = spans[j];
      const end = start + (to - from);
      if (end <= this.body.length && this.body.compare(before, from, to, start, end) === 0) {
        this.next = j + 1;
        this.at = end;
        return j;
      }
    }
    return -1;
  }

  /** An object; `member` reads each value (given its name's bytes as written), the scanner standing at it. */
  private members(member: (name: Buffer) => void): void {
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
      const name = this.body.subarray(nameStart + 1, this.at - 1);
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
    const body = this.body;
    const length = body.length;
    if (c !== OPEN_BRACE && c !== OPEN_BRACKET) {
      const start = this.at;
      while (this.at < length && !isDelimiter(body[this.at])) this.at++;
      if (this.at === start) throw new NotAState();
      return;
    }
    let depth = 0;
    let at = this.at;
    while (at < length) {
      const d = body[at];
      if (d === QUOTE) {
        this.at = at;
        this.skipString();
        at = this.at;
        continue;
      }
      at++;
      if (d === OPEN_BRACE || d === OPEN_BRACKET) depth++;
      else if ((d === CLOSE_BRACE || d === CLOSE_BRACKET) && --depth === 0) {
        this.at = at;
        return;
      }
    }
    throw new NotAState();
  }

  private skipString(): void {
    this.expect(QUOTE);
    const body = this.body;
    for (;;) {
      // Buffer#indexOf of a byte is a native memchr.
      const close = body.indexOf(QUOTE, this.at);
      if (close < 0) throw new NotAState();
      let backslashes = 0;
      while (body[close - 1 - backslashes] === BACKSLASH) backslashes++;
      this.at = close + 1;
      if (backslashes % 2 === 0) return;
    }
  }

  private space(): void {
    const body = this.body;
    while (this.at < body.length) {
      const c = body[this.at];
      if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return;
      this.at++;
    }
  }

  private peek(): number {
    return this.at < this.body.length ? this.body[this.at] : -1;
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
