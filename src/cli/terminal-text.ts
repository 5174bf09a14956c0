import { StringDecoder } from 'node:string_decoder';
import { Transform } from 'node:stream';

/**
 * Text kl prints that came from elsewhere — kld's answers, other users' actor
 * names, lock info and run info, local files — may hold control characters:
 * ESC sequences that clear the screen, set the title or write the clipboard
 * (OSC 52), CR and backspace that overwrite what was printed, bidi overrides
 * that reorder it. Shown to a person they are spelled out instead (docs/cli.md):
 * `\x1b`, `\r`, `\u202e`. Data formats stay exact: JSON escapes them as
 * `\uXXXX` (the same value), CSV and `kl export` keep them when written to a
 * file or a pipe.
 */

// C0 (with \n), DEL, C1, and the invisible marks that reorder or hide text.
// Matching control characters is the point of these patterns.
/* eslint-disable no-control-regex */
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/g;
const CONTROL_BUT_NEWLINE =
  /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/g;
// What JSON.stringify leaves raw inside strings; outside strings valid JSON holds none of them.
const JSON_RAW = /[\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/g;
// Raw C0 is never inside a valid JSON string; a hostile answer may still carry it.
const JSON_INVALID_CONTROL = /[\u0000-\u0008\u000b-\u001f]/g;
/* eslint-enable no-control-regex */

const NAMED: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

function spelled(c: string): string {
  const code = c.charCodeAt(0);
  return NAMED[c] ?? (code < 0x100 ? `\\x${hex(code, 2)}` : `\\u${hex(code, 4)}`);
}

function hex(code: number, width: number): string {
  return code.toString(16).padStart(width, '0');
}

/** One value or one line for a person: every control character spelled out, newlines too. */
export function visible(text: string): string {
  return text.replace(CONTROL, spelled);
}

/** Several lines for a person: control characters spelled out, line breaks kept. */
export function visibleLines(text: string): string {
  return text.replace(CONTROL_BUT_NEWLINE, spelled);
}

/**
 * JSON text safe on a terminal and still the same JSON: the characters
 * JSON.stringify leaves raw become `\uXXXX` escapes. Line breaks (indentation)
 * and tabs stay.
 */
export function terminalSafeJson(json: string): string {
  return json
    .replace(JSON_RAW, (c) => `\\u${hex(c.charCodeAt(0), 4)}`)
    .replace(JSON_INVALID_CONTROL, (c) => `\\u${hex(c.charCodeAt(0), 4)}`);
}

/**
 * The longest error line kl prints. kld's own messages name at most a few
 * addresses ("… and 17 more"), far below it; a server sending megabytes as
 * one message would otherwise flood the terminal or a CI log.
 */
export const MAX_ERROR_CHARS = 16_384;

/** The first non-empty line of an error's message, spelled out for a terminal. */
export function errorLine(e: unknown): string {
  const text = e instanceof Error ? e.message : String(e);
  // CR counts as a line end here: a message cannot rewrite its own line.
  const first = (text.split(/\r?\n/).find((l) => l.trim() !== '') ?? text).trim();
  if (first.length <= MAX_ERROR_CHARS) return visible(first);
  const rest = first.length - MAX_ERROR_CHARS;
  return `${visible(first.slice(0, MAX_ERROR_CHARS))}… (${rest} more characters)`;
}

/** terminalSafeJson over a stream of JSON text (NDJSON), a character cut between chunks kept whole. */
export function terminalSafeJsonStream(): Transform {
  const decoder = new StringDecoder('utf8');
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      done(null, terminalSafeJson(decoder.write(chunk)));
    },
    flush(done) {
      done(null, terminalSafeJson(decoder.end()));
    },
  });
}
