import { normaliseProviderSource } from './provider-address';

export interface LockedProvider {
  version: string;
  constraints?: string;
  hashes: string[];
}

/**
 * Reads the `provider "<source>" { version = … }` blocks of a
 * `.terraform.lock.hcl`. The file is machine-written HCL with a fixed shape,
 * so a small scanner is enough; keys are normalised source addresses.
 */
export function parseLockFile(text: string): Map<string, LockedProvider> {
  const src = stripComments(text);
  const out = new Map<string, LockedProvider>();
  const header = /provider\s+"([^"]+)"\s*\{/g;
  let m: RegExpExecArray | null;
  while ((m = header.exec(src))) {
    const body = blockBody(src, header.lastIndex);
    header.lastIndex += body.length;
    const version = /(?:^|\n)\s*version\s*=\s*"([^"]*)"/.exec(body)?.[1];
    if (!version) continue;
    const constraints = /(?:^|\n)\s*constraints\s*=\s*"([^"]*)"/.exec(body)?.[1];
    const hashesList = /(?:^|\n)\s*hashes\s*=\s*\[([^\]]*)\]/.exec(body)?.[1] ?? '';
    const hashes = [...hashesList.matchAll(/"([^"]*)"/g)].map((h) => h[1]);
    let source: string;
    try {
      source = normaliseProviderSource(m[1]);
    } catch {
      continue;
    }
    out.set(source, { version, ...(constraints !== undefined ? { constraints } : {}), hashes });
  }
  return out;
}

/** The text up to the brace that closes the block opened just before `start`. */
function blockBody(src: string, start: number): string {
  let depth = 1;
  let inString = false;
  for (let i = start; i < src.length; i++) {
    const c = src[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{') depth++;
    else if (c === '}' && --depth === 0) return src.slice(start, i);
  }
  return src.slice(start);
}

function stripComments(text: string): string {
  let out = '';
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      out += c;
      if (c === '\\' && i + 1 < text.length) out += text[++i];
      else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') {
      inString = true;
      out += c;
    } else if (c === '#' || (c === '/' && text[i + 1] === '/')) {
      while (i < text.length && text[i] !== '\n') i++;
      out += '\n';
    } else if (c === '/' && text[i + 1] === '*') {
      const end = text.indexOf('*/', i + 2);
      i = end < 0 ? text.length : end + 1;
      out += ' ';
    } else out += c;
  }
  return out;
}
