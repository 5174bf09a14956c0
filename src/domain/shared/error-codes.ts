/**
 * Every error code kld and kl use: public and stable, clients match on them.
 * Add a code here, give it a status in the HTTP layer's map (the compiler
 * insists) and a row in docs/api.md (a test insists). One code per meaning.
 */
export const ERROR_CODES = [
  'REQUEST.INVALID',
  'REQUEST.NOT_FOUND',
  'REQUEST.TOO_LARGE',
  'REQUEST.UNSUPPORTED_MEDIA_TYPE',
  'REQUEST.FORBIDDEN_ORIGIN',
  'REQUEST.FORBIDDEN_HOST',

  'STATE.NOT_FOUND',
  'STATE.INVALID',
  'STATE.LOCKED',
  'STATE.LOCK_MISMATCH',
  'STATE.VERSION_CONFLICT',
  'STATE.LINEAGE_CONFLICT',
  'STATE.SERIAL_CONFLICT',
  'VERSION.NOT_FOUND',
  'RESOURCE.NOT_FOUND',
  'ADDRESS.INVALID',

  'EVENTS.WRONG_EXPECTED_REVISION',
  'EVENTS.EVENT_ID_CONFLICT',
  'SNAPSHOT.INVALID',

  'REFRESH.NOT_FOUND',
  'REFRESH.INVALID',
  'REFRESH.ALREADY_STARTED',
  'REFRESH.FINISHED',
  'REFRESH.STATE_CHANGED',
  'REFRESH.CONFIG_ENV_MISSING',
  'REFRESH.CONFIG_ENV_REFUSED',
  'PROVIDER_CONFIG.NOT_FOUND',
  'PROVIDER_CONFIG.INVALID',
  'PROVIDER_SCHEMA.NOT_FOUND',

  'PROVIDER.NOT_FOUND',
  'PROVIDER.INVALID_SOURCE',
  'PROVIDER.UNKNOWN_TYPE',
  'PROVIDER.START_FAILED',
  'PROVIDER.CRASHED',
  'PROVIDER.CLOSED',
  'PROVIDER.TIMEOUT',
  'PROVIDER.RPC_FAILED',
  'PROVIDER.DIAGNOSTICS',
  'CTY.TYPE_MISMATCH',
  'CTY.UNSUPPORTED_ATTRIBUTE',
  'CTY.UNKNOWN_VALUE',
  'CTY.INVALID_TYPE',
  'CTY.MALFORMED_MSGPACK',

  'QUERY.INVALID',
  'QUERY.FORBIDDEN',
  'QUERY.TIMEOUT',

  'PROJECTIONS.REBUILD_RUNNING',
  'PROJECTIONS.CANNOT_APPLY',

  'SERVER.ERROR',
  'SERVER.UNAVAILABLE',
  'SERVER.LAGGING',

  // Never an HTTP answer: kld stops with these at start or in its offline
  // commands, kl with the client-side ones.
  'CONFIG.INVALID',
  'MIGRATION.FAILED',
  'SERVER.RUNNING',
  'SERVER.UNREACHABLE',
  'SERVER.UNEXPECTED_ANSWER',
  'CLI.ABORTED',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

const KNOWN: ReadonlySet<string> = new Set(ERROR_CODES);

/** A code from outside (a server's answer): known to this build, or not. */
export function isErrorCode(code: unknown): code is ErrorCode {
  return typeof code === 'string' && KNOWN.has(code);
}
