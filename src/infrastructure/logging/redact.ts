/**
 * Masks the password in every `scheme://user:password@…` of a text, and any
 * `password=` query parameter. It works on free text (error messages, stack
 * traces, a value `new URL` refuses), so it is applied to whatever we print
 * rather than trusted to callers that build URLs. Over-masking a token is
 * fine; showing a password is not.
 */
const USERINFO_PASSWORD = /\b([a-z][a-z0-9+.-]*:\/\/[^\s:/?#@"'<>]*):[^\s"'<>]*@/gi;
const PASSWORD_PARAM = /([?&;\s]password=)[^&\s"'<>]*/gi;

export function redactUrls(text: string): string {
  return text.replace(USERINFO_PASSWORD, '$1:***@').replace(PASSWORD_PARAM, '$1***');
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
