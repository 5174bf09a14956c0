/**
 * Terraform prints string instance keys as HCL quoted strings (addrs'
 * toHCLQuotedString): backslash escapes, `${`/`%{` doubled, non-printable
 * runes as \uXXXX / \UXXXXXXXX. Addresses must match terraform byte for byte,
 * so this follows that function, not JSON.stringify.
 */
const PRINTABLE = /^[\p{L}\p{M}\p{N}\p{P}\p{S} ]$/u; // Go's unicode.IsPrint

export function quoteHclString(s: string): string {
  let out = '"';
  const chars = Array.from(s);
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i];
    switch (c) {
      case '\n':
        out += '\\n';
        break;
      case '\r':
        out += '\\r';
        break;
      case '\t':
        out += '\\t';
        break;
      case '"':
        out += '\\"';
        break;
      case '\\':
        out += '\\\\';
        break;
      case '$':
      case '%':
        out += chars[i + 1] === '{' ? c + c : c;
        break;
      default: {
        if (PRINTABLE.test(c)) {
          out += c;
        } else {
          const cp = c.codePointAt(0) ?? 0;
          out +=
            cp < 0x10000
              ? `\\u${cp.toString(16).padStart(4, '0')}`
              : `\\U${cp.toString(16).padStart(8, '0')}`;
        }
      }
    }
  }
  return out + '"';
}

/**
 * Reads a quoted string starting at `text[start]` (the opening quote).
 * Returns the value and the index just past the closing quote, or null when
 * the text there is not a quoted string terraform could have written.
 */
export function readHclQuotedString(
  text: string,
  start: number,
): { value: string; end: number } | null {
  if (text[start] !== '"') return null;
  let value = '';
  let i = start + 1;
  while (i < text.length) {
    const c = text[i];
    if (c === '"') return { value, end: i + 1 };
    if (c === '\\') {
      const e = text[i + 1];
      const simple: Record<string, string> = { n: '\n', r: '\r', t: '\t', '"': '"', '\\': '\\' };
      if (e !== undefined && e in simple) {
        value += simple[e];
        i += 2;
        continue;
      }
      const width = e === 'u' ? 4 : e === 'U' ? 8 : 0;
      const hex = text.slice(i + 2, i + 2 + width);
      if (width === 0 || !/^[0-9a-fA-F]+$/.test(hex) || hex.length !== width) return null;
      const cp = parseInt(hex, 16);
      if (cp > 0x10ffff) return null;
      value += String.fromCodePoint(cp);
      i += 2 + width;
      continue;
    }
    if ((c === '$' || c === '%') && text[i + 1] === '{') return null; // a template, not a key
    if ((c === '$' || c === '%') && text[i + 1] === c && text[i + 2] === '{') {
      value += c + '{';
      i += 3;
      continue;
    }
    value += c;
    i += 1;
  }
  return null;
}
