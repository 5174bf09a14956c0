import { DomainError } from '../../domain/shared/domain-error';

export const QUERY_INVALID = 'QUERY.INVALID';
export const QUERY_TIMEOUT = 'QUERY.TIMEOUT';
export const QUERY_FORBIDDEN = 'QUERY.FORBIDDEN';

/** What node-postgres puts on an error the server sent. */
export interface PgServerError {
  code: string;
  message: string;
  position?: string;
  hint?: string;
  detail?: string;
}

export function isPgServerError(err: unknown): err is PgServerError {
  const e = err as { code?: unknown; severity?: unknown } | null;
  return typeof e?.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code) && e.severity !== undefined;
}

/**
 * A PostgreSQL error on user SQL, as the user should read it: the server's
 * own message, where in the SQL it points (`position` counts characters from
 * 1 in the text the user sent) and its hint. Privilege and read-only refusals
 * are FORBIDDEN so scripts can tell "not allowed" from "wrong".
 */
export function queryError(err: PgServerError, timeoutMs: number): DomainError {
  const metadata = { sqlstate: err.code, position: err.position ? Number(err.position) : null };
  if (err.code === '57014' && /statement timeout/.test(err.message)) {
    return new DomainError(
      QUERY_TIMEOUT,
      `query cancelled: it ran longer than the timeout of ${timeoutMs} ms`,
      metadata,
    );
  }
  const forbidden = err.code === '42501' || err.code === '25006';
  const message =
    err.code === '42601' && /multiple commands/.test(err.message)
      ? 'only one SQL statement is allowed per query'
      : err.message;
  const where = err.position ? ` (at character ${err.position})` : '';
  const hint = err.hint ? `; hint: ${err.hint}` : '';
  return new DomainError(
    forbidden ? QUERY_FORBIDDEN : QUERY_INVALID,
    `${message}${where}${hint}`,
    metadata,
  );
}
