import type { ErrorCode } from '../../domain/shared/error-codes';

/**
 * The HTTP status of every error code; the compiler refuses a code without
 * one. `null`: never an HTTP answer (kld stops with it, or only kl raises
 * it); one that reaches a response anyway is a bug, answered as a logged 500.
 * docs/api.md's table of codes is checked against this map.
 */
export const HTTP_STATUS_BY_CODE = {
  'REQUEST.INVALID': 400,
  'REQUEST.NOT_FOUND': 404,
  'REQUEST.TOO_LARGE': 413,
  'REQUEST.UNSUPPORTED_MEDIA_TYPE': 415,
  'REQUEST.FORBIDDEN_ORIGIN': 403,
  'REQUEST.FORBIDDEN_HOST': 403,
  // One caller's heavy requests in flight past its bound (caller-bounds.ts); Retry-After.
  'REQUEST.TOO_MANY': 429,

  'STATE.NOT_FOUND': 404,
  'STATE.INVALID': 400,
  'STATE.LOCKED': 423,
  'STATE.LOCK_MISMATCH': 409,
  'STATE.VERSION_CONFLICT': 409,
  'STATE.LINEAGE_CONFLICT': 409,
  'STATE.SERIAL_CONFLICT': 409,
  'STATE.EXISTS': 409,
  'VERSION.NOT_FOUND': 404,
  'RESOURCE.NOT_FOUND': 404,
  'ADDRESS.INVALID': 400,

  'EVENTS.WRONG_EXPECTED_REVISION': 409,
  'EVENTS.EVENT_ID_CONFLICT': 409,
  'EVENTS.INVALID_POSITION': 400,
  'EVENTS.INVALID_FILTER': 400,
  'ARCHIVE.INVALID': 400,
  // Our own stored snapshot: the server's fault, never the caller's.
  'SNAPSHOT.INVALID': 500,

  'REFRESH.NOT_FOUND': 404,
  'REFRESH.INVALID': 400,
  'REFRESH.ALREADY_STARTED': 409,
  'REFRESH.FINISHED': 409,
  'REFRESH.STATE_CHANGED': 409,
  'REFRESH.CONFIG_ENV_MISSING': 400,
  // The server's policy, not the caller's request, forbids reading that variable.
  'REFRESH.CONFIG_ENV_REFUSED': 403,
  'PROVIDER_CONFIG.NOT_FOUND': 404,
  'PROVIDER_CONFIG.INVALID': 400,
  'PROVIDER_SCHEMA.NOT_FOUND': 404,
  'PROVIDER_SCHEMA.CONFLICT': 409,

  'PROVIDER.NOT_FOUND': 404,
  'PROVIDER.INVALID_SOURCE': 400,
  'PROVIDER.UNKNOWN_TYPE': 400,
  // A provider plugin kld ran for a server-side refresh failed: an upstream's failure.
  'PROVIDER.START_FAILED': 502,
  'PROVIDER.CRASHED': 502,
  'PROVIDER.CLOSED': 502,
  'PROVIDER.TIMEOUT': 504,
  'PROVIDER.RPC_FAILED': 502,
  'PROVIDER.DIAGNOSTICS': 502,
  'CTY.TYPE_MISMATCH': 400,
  'CTY.UNSUPPORTED_ATTRIBUTE': 400,
  'CTY.UNKNOWN_VALUE': 400,
  'CTY.INVALID_TYPE': 400,
  'CTY.MALFORMED_MSGPACK': 502,

  'RESERVATION.CONFLICT': 409,
  'RESERVATION.NOT_HELD': 409,
  'RESERVATION.EXPIRED': 409,
  'RESERVATION.GLOB_INVALID': 400,
  'APPLY.STALE': 409,
  'APPLY.INVALID': 400,
  'APPLY.NO_VERSION': 409,
  'APPLY.ALREADY_STARTED': 409,
  'APPLY.NOT_FOUND': 404,
  'APPLY.FINISHED': 409,

  'QUERY.INVALID': 400,
  // 400, not 403: the caller is allowed to query; this SQL touched what no query may.
  'QUERY.FORBIDDEN': 400,
  'QUERY.TIMEOUT': 400,
  'QUERY.TOO_LARGE': 400,

  'PROJECTIONS.REBUILD_RUNNING': 409,
  // A rebuild met an event a projector cannot apply (docs/operations.md).
  'PROJECTIONS.CANNOT_APPLY': 409,

  // No valid token: terraform prints "HTTP remote state endpoint requires auth".
  'AUTH.UNAUTHENTICATED': 401,
  // A valid token whose scopes do not reach: terraform prints "… invalid auth".
  'AUTH.FORBIDDEN': 403,
  'TOKEN.INVALID': 400,
  'TOKEN.EXISTS': 409,
  'TOKEN.NOT_FOUND': 404,
  'QUOTA.INVALID': 400,
  'QUOTA.NOT_FOUND': 404,
  // An apply on a state over its hard limit: refused like a held lock (terraform reads 423).
  'QUOTA.EXCEEDED': 423,

  'SERVER.ERROR': 500,
  'SERVER.UNAVAILABLE': 503,
  // The write is stored; the read models do not show it yet (a retry is safe).
  'SERVER.LAGGING': 503,

  'CONFIG.INVALID': null,
  'MIGRATION.FAILED': null,
  'SERVER.RUNNING': null,
  'SERVER.UNREACHABLE': null,
  'SERVER.UNEXPECTED_ANSWER': null,
  'CLI.ABORTED': null,
  'PLAN.INVALID': null,
  'PLAN.FILE_INVALID': null,
  'PLAN.SCOPE_INVALID': null,
  'PLAN.CONFIG_INVALID': null,
  'PLAN.BACKEND_UNKNOWN': null,
  'TERRAFORM.FAILED': null,
  'APPLY.INTERRUPTED': null,
} as const satisfies Record<ErrorCode, number | null>;

/**
 * The status a code is answered with; null for a code no answer may carry
 * (unknown at run time, or one of the process-only codes above): the caller
 * then answers a logged 500, never a guess.
 */
export function statusFor(code: string): number | null {
  return Object.hasOwn(HTTP_STATUS_BY_CODE, code) ? HTTP_STATUS_BY_CODE[code as ErrorCode] : null;
}
