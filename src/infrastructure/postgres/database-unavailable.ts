/**
 * Whether an error means PostgreSQL cannot be reached or is not taking work
 * now, as opposed to a fault of the statement or of kld: the caller may
 * retry the same request later and it can succeed. Errors wrapped as a
 * `cause` are looked through. Read by shape, not `instanceof Error`: a
 * socket's error may come from another realm (a test runner's sandbox).
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  let e = err as { code?: unknown; message?: unknown; cause?: unknown } | null;
  for (let depth = 0; typeof e === 'object' && e !== null && depth < 5; depth++) {
    const { code, message } = e;
    if (typeof code === 'string' && (SOCKET_CODES.has(code) || isUnavailableState(code))) {
      return true;
    }
    if (typeof message === 'string' && CLIENT_MESSAGES.some((m) => message.startsWith(m))) {
      return true;
    }
    e = e.cause as typeof e;
  }
  return false;
}

/** Node's socket errors on the way to the server. */
const SOCKET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/**
 * SQLSTATEs of a server that is going away or full: class 08 (connection
 * exception), 57P01–57P03 (shut down by the administrator, crash,
 * not accepting connections yet), 53300 (too many connections).
 */
function isUnavailableState(code: string): boolean {
  return /^08[0-9A-Z]{3}$/.test(code) || ['57P01', '57P02', '57P03', '53300'].includes(code);
}

/** node-postgres's own words for a connection that ended or never opened. */
const CLIENT_MESSAGES = [
  'Connection terminated',
  'timeout expired',
  // pg-pool: every client busy for the whole connect timeout
  'timeout exceeded when trying to connect',
  'Client has encountered a connection error and is not queryable',
  'Client was closed and is not queryable',
  'Cannot use a pool after calling end on the pool',
];
