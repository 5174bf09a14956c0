/**
 * Masks the password in every `scheme://user:password@…` of a text, any
 * `password=` query parameter, and every kld token (`kl_` and 43 base64url
 * characters: a client may send one in a URL, which the request log writes)
 * after its first 11 characters, the prefix `kl token list` shows. It works on free text (error messages, stack
 * traces, a value `new URL` refuses), so it is applied to whatever we print
 * rather than trusted to callers that build URLs. Over-masking a token is
 * fine; showing a password is not.
 */
const USERINFO_PASSWORD = /\b([a-z][a-z0-9+.-]*:\/\/[^\s:/?#@"'<>]*):[^\s"'<>]*@/gi;
const PASSWORD_PARAM = /([?&;\s]password=)[^&\s"'<>]*/gi;
const TOKEN = /(kl_[A-Za-z0-9_-]{8})[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])/g;

export function redactUrls(text: string): string {
  return text
    .replace(USERINFO_PASSWORD, '$1:***@')
    .replace(PASSWORD_PARAM, '$1***')
    .replace(TOKEN, '$1***');
}

/** redactUrls applied to every string inside a plain value (a serialised error, say). */
export function redactDeep<T>(value: T, depth = 0): T {
  if (typeof value === 'string') return redactUrls(value) as T;
  if (depth > 8 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((v) => redactDeep(v, depth + 1)) as T;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = redactDeep(v, depth + 1);
  return out as T;
}
