import { render, renderJson } from './render';
import { Readable } from 'node:stream';
import {
  errorLine,
  MAX_ERROR_CHARS,
  terminalSafeJson,
  terminalSafeJsonStream,
  visible,
  visibleLines,
} from './terminal-text';

// What another user of a shared kld (or a hostile one) can put in an actor,
// a lock's Who, a state name: clipboard write, clear screen, title, CR
// overwrite, a bidi override, backspace, an 8-bit CSI.
const HOSTILE = '\x1b]52;c;ZXZpbA==\x07\x1b[2J\x1b]0;pwned\x07\rOK\u202egnp.exe\b\x9b31m';
// eslint-disable-next-line no-control-regex
const RAW_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

describe('visible', () => {
  it('spells out every control character, so a value cannot rewrite the screen', () => {
    expect(visible(HOSTILE)).toBe(
      '\\x1b]52;c;ZXZpbA==\\x07\\x1b[2J\\x1b]0;pwned\\x07\\rOK\\u202egnp.exe\\x08\\x9b31m',
    );
    expect(visible('a\nb\tc\u2028d\u200fe\ufeff')).toBe('a\\nb\\tc\\u2028d\\u200fe\\ufeff');
  });

  it('leaves ordinary text alone, accents and wide characters included', () => {
    const text = 'prod/eu-west-1 módulo 生产 ✓ "quoted" \\path';
    expect(visible(text)).toBe(text);
    expect(visibleLines(`${text}\n${text}`)).toBe(`${text}\n${text}`);
  });

  it('keeps line breaks in text of several lines, and spells out the rest', () => {
    expect(visibleLines(`one ${HOSTILE}\ntwo`)).toMatch(/^one \\x1b.*\ntwo$/);
    expect(visibleLines(`one ${HOSTILE}\ntwo`)).not.toMatch(RAW_CONTROL);
  });
});

describe('terminalSafeJson', () => {
  it('escapes what JSON.stringify leaves raw and stays the same JSON', () => {
    const value = { actor: `${HOSTILE}\u2028\u2066`, n: [1, 'x'] };
    const text = terminalSafeJson(JSON.stringify(value, null, 2));
    expect(text).not.toMatch(RAW_CONTROL);
    expect(text).toContain('\\u202e');
    expect(JSON.parse(text)).toEqual(value);
  });

  it('escapes raw control characters of text that is not valid JSON', () => {
    expect(terminalSafeJson(`{"a":"${HOSTILE}`)).not.toMatch(RAW_CONTROL);
  });

  it('does the same over a stream, a character cut between two chunks kept whole', async () => {
    const line = `${JSON.stringify({ actor: `生${HOSTILE}` })}\n`;
    const bytes = Buffer.from(line);
    const cut = bytes.indexOf(Buffer.from('生')) + 1;
    let out = '';
    for await (const c of Readable.from([bytes.subarray(0, cut), bytes.subarray(cut)]).pipe(
      terminalSafeJsonStream(),
    ))
      out += String(c);
    expect(out).toBe(terminalSafeJson(line));
    expect(JSON.parse(out)).toEqual({ actor: `生${HOSTILE}` });
  });
});

describe('errorLine', () => {
  it('is the first non-empty line, a CR inside it spelled out', () => {
    expect(errorLine(new Error(`\nheld by bob\rOK ${HOSTILE}\nsecond`))).toBe(
      `held by bob\\rOK ${visible(HOSTILE)}`,
    );
    expect(errorLine('plain')).toBe('plain');
  });

  it('is cut after MAX_ERROR_CHARS, saying how much was left out', () => {
    const line = errorLine(new Error(`held by ${'x'.repeat(MAX_ERROR_CHARS * 10)}\nsecond`));
    expect(line).toBe(
      `held by ${'x'.repeat(MAX_ERROR_CHARS - 8)}… (${MAX_ERROR_CHARS * 9 + 8} more characters)`,
    );
    expect(errorLine('y'.repeat(MAX_ERROR_CHARS))).toBe('y'.repeat(MAX_ERROR_CHARS));
  });
});

describe('render of hostile cells', () => {
  const rows = {
    columns: ['name', 'who'],
    rows: [
      ['a', HOSTILE],
      ['b', 'line1\nline2'],
    ],
  };

  it('spells out control characters in a table: no fake rows, no escape sequences', () => {
    const table = render(rows, 'table', false);
    expect(table).not.toMatch(RAW_CONTROL);
    expect(table).toContain(visible(HOSTILE));
    expect(table).toContain('line1\\nline2');
    // Top border, header, 2 rows, bottom border (compact: no rule under the header).
    expect(table.trimEnd().split('\n')).toHaveLength(5);
  });

  it('keeps csv exact for a file or a pipe, and spells it out on a terminal', () => {
    const piped = render(rows, 'csv', false);
    expect(piped).toContain(`a,"${HOSTILE}"\r\n`);
    const shown = render(rows, 'csv', true);
    expect(shown.replace(/\r\n/g, '')).not.toMatch(RAW_CONTROL);
    expect(shown).toContain(`a,${visible(HOSTILE)}\r\n`);
  });

  it('writes json with escapes only: the same values come back', () => {
    const json = render(rows, 'json');
    expect(json).not.toMatch(RAW_CONTROL);
    expect(JSON.parse(json)).toEqual([
      { name: 'a', who: HOSTILE },
      { name: 'b', who: 'line1\nline2' },
    ]);
    expect(JSON.parse(renderJson({ who: HOSTILE }))).toEqual({ who: HOSTILE });
  });
});
