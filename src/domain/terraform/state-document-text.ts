import { JsonValue } from './json-value';
import { stringifyJson } from './lossless-json';
import { InstanceObjectV4, ResourceV4, StateDocumentV4 } from './state-document';

/** A served document in order: its text, with the instance objects left to write. */
export type DocumentPart = string | InstanceObjectV4;
type Part = DocumentPart;

/**
 * The one formatting of a served document: the raw-state projector and the
 * on-demand rebuild of older versions both use it, so a version reads back
 * byte for byte as it was served while current. Terraform accepts any JSON;
 * two-space indentation and a final newline match what it writes itself:
 * the text is exactly `stringifyJson(doc, 2) + '\n'`.
 */
export function stateDocumentText(doc: StateDocumentV4): string {
  return [...stateDocumentTextPieces(doc)].join('');
}

/** Characters per piece of stateDocumentTextPieces: about 10 ms of writing. */
const PIECE_CHARS = 1 << 20;

/**
 * stateDocumentText in pieces of at least `pieceChars` characters (the last
 * one may be shorter), each instance object written when its piece is asked
 * for: a caller can let other work run between pieces. The text of a
 * 20,000-instance document took about 230 ms in one go.
 */
export function* stateDocumentTextPieces(
  doc: StateDocumentV4,
  pieceChars = PIECE_CHARS,
): Generator<string> {
  let piece: string[] = [];
  let size = 0;
  for (const part of documentParts(doc)) {
    const text = typeof part === 'string' ? part : instanceObjectText(part);
    piece.push(text);
    size += text.length;
    if (size >= pieceChars) {
      yield piece.join('');
      piece = [];
      size = 0;
    }
  }
  if (piece.length > 0) yield piece.join('');
}

/**
 * `stateDocumentText` as UTF-8, with each instance's bytes from
 * `instanceBytes`, which a caller may answer from a cache: a commit that
 * changed one instance of a big state then re-serialises only that one.
 */
export function stateDocumentBytes(
  doc: StateDocumentV4,
  instanceBytes: (instance: InstanceObjectV4) => Buffer = (o) => Buffer.from(instanceObjectText(o)),
): Buffer {
  const encoded = new Map<string, Buffer>();
  const bytes = (text: string): Buffer => {
    // The same few separators repeat between thousands of instances.
    let b = encoded.get(text);
    if (b === undefined) encoded.set(text, (b = Buffer.from(text, 'utf8')));
    return b;
  };
  return Buffer.concat(
    documentParts(doc).map((p) => (typeof p === 'string' ? bytes(p) : instanceBytes(p))),
  );
}

// What JSON.stringify(value, null, 2) writes around a value four arrays
// deep: there it indents the value as deep as an instance object sits in a
// document (root, resources[], resource, instances[]).
const INSTANCE_OPEN = JSON.stringify([[[[0]]]], null, 2).split('0')[0];
const INSTANCE_CLOSE = JSON.stringify([[[[0]]]], null, 2).split('0')[1];

/** An instance object exactly as a served document spells it. */
export function instanceObjectText(instance: InstanceObjectV4): string {
  // Written where its indentation is the document's and cut out: one native
  // pass, instead of splitting its lines and joining them indented deeper
  // (as `nested` does), for the tens of thousands of a first commit.
  const text = stringifyJson([[[[instance]]]], 2);
  return text.slice(INSTANCE_OPEN.length, text.length - INSTANCE_CLOSE.length);
}

/**
 * JSON.stringify(doc, null, 2) spelled out level by level down to the
 * instance objects, which are left for the caller to write (each as
 * `instanceObjectText`).
 */
export function documentParts(doc: StateDocumentV4): Part[] {
  const parts: Part[] = [];
  objectParts(parts, doc, '', (key, value) => {
    if (key === 'resources' && Array.isArray(value)) {
      arrayParts(parts, doc.resources, '  ', (r: ResourceV4) =>
        objectParts(parts, r, '    ', (k, v) => {
          if (k === 'instances' && Array.isArray(v)) {
            arrayParts(parts, r.instances, '      ', (o) => parts.push(o));
          } else {
            parts.push(nested(v, '      '));
          }
        }),
      );
    } else {
      parts.push(nested(value, '  '));
    }
  });
  parts.push('\n');
  return parts;
}

/** JSON.stringify(value, null, 2) of a value that sits `indent` deep. */
function nested(value: JsonValue, indent: string): string {
  // JSON strings hold no raw newline: every newline is indentation. (split
  // and join, unlike replaceAll, give a flat string, cheap to copy later.)
  return stringifyJson(value, 2).split('\n').join(`\n${indent}`);
}

/** An object `indent` deep, each member's value written by `member`. */
function objectParts(
  parts: Part[],
  object: { [key: string]: JsonValue | undefined },
  indent: string,
  member: (key: string, value: JsonValue) => void,
): void {
  const inner = `${indent}  `;
  let first = true;
  for (const [key, value] of Object.entries(object)) {
    if (value === undefined) continue;
    parts.push(`${first ? '{\n' : ',\n'}${inner}${JSON.stringify(key)}: `);
    member(key, value);
    first = false;
  }
  parts.push(first ? '{}' : `\n${indent}}`);
}

/** An array `indent` deep, each element written by `element`. */
function arrayParts<T>(parts: Part[], items: T[], indent: string, element: (item: T) => void) {
  if (items.length === 0) {
    parts.push('[]');
    return;
  }
  const inner = `${indent}  `;
  const separator = `,\n${inner}`;
  parts.push(`[\n${inner}`);
  items.forEach((item, i) => {
    if (i > 0) parts.push(separator);
    element(item);
  });
  parts.push(`\n${indent}]`);
}
