import type { SeededRandom } from './seeded-random';

/**
 * Hostile inputs for the e2e fuzzers, drawn from one seeded source so a
 * printed seed replays the same requests: texts from a spec's pool (or a
 * made-up one), path segments, JSON values of every shape down to a few
 * levels, and a valid body with members replaced, dropped or added.
 * `words` are the values a spec's routes take as enums or scopes.
 */
export function fuzzInputs(r: SeededRandom, texts: readonly string[], words: readonly string[]) {
  const { int, pick, chance } = r;
  const text = () => (chance(0.8) ? pick(texts) : `t${int(1000)}`);
  /** A path segment: a lone surrogate goes as the bytes UTF-8 has no place for. */
  const segment = (t: string) => {
    try {
      return encodeURIComponent(t);
    } catch {
      return '%ED%A0%80';
    }
  };
  function value(depth = 0): unknown {
    switch (int(depth > 3 ? 5 : 8)) {
      case 0:
        return text();
      case 1:
        return pick([null, true, false, 0, -1, 1.5, 2 ** 31, Number.MAX_SAFE_INTEGER]);
      case 2:
        return int(100_000);
      case 3:
        return chance(0.1) ? '['.repeat(5000) : text();
      case 4:
        return pick(words);
      case 5:
        return Array.from({ length: int(4) }, () => value(depth + 1));
      default: {
        const o: Record<string, unknown> = {};
        for (let i = int(4); i > 0; i--) o[chance(0.3) ? text() : `k${int(5)}`] = value(depth + 1);
        return o;
      }
    }
  }
  function mutated(valid: Record<string, unknown>): unknown {
    if (chance(0.05)) return value();
    const body: Record<string, unknown> = { ...valid };
    for (const key of Object.keys(body)) {
      if (chance(0.3)) body[key] = value();
      else if (chance(0.1)) delete body[key];
    }
    if (chance(0.2)) body[text()] = value();
    return body;
  }
  return { text, segment, value, mutated };
}

/** How a fuzzed request was answered: its body as JSON (null when it is not), and whether it is a clear refusal (a 4xx with `{error:{code,message}}`). */
export function fuzzAnswer(
  status: number,
  body: string,
): { json: unknown; refusedClearly: boolean } {
  type ErrorBody = { error?: { code?: unknown; message?: unknown } } | null;
  const json = ((): ErrorBody => {
    try {
      return JSON.parse(body) as ErrorBody;
    } catch {
      return null;
    }
  })();
  const refusedClearly =
    status >= 400 &&
    status < 500 &&
    typeof json?.error?.code === 'string' &&
    typeof json.error.message === 'string';
  return { json, refusedClearly };
}
