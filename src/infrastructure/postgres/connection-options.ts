/** How long opening a connection may take when the URL does not say. */
export const DEFAULT_CONNECT_TIMEOUT_S = 10;

/**
 * The `connect_timeout` of a PostgreSQL URL in seconds, as libpq reads it
 * (`?connect_timeout=5`; 0 waits for ever), or the default when absent.
 * node-postgres ignores the parameter, and without a bound a server that
 * accepts and never answers holds every caller for as long as its socket
 * lives. Throws on a value libpq would refuse too.
 */
export function connectTimeoutSeconds(url: string): number {
  let raw: string | null;
  try {
    raw = new URL(url).searchParams.get('connect_timeout');
  } catch {
    return DEFAULT_CONNECT_TIMEOUT_S; // a socket path or key=value string: nothing to read here
  }
  if (raw === null) return DEFAULT_CONNECT_TIMEOUT_S;
  if (!/^\d{1,6}$/.test(raw.trim())) {
    throw new Error(
      `connect_timeout: expected whole seconds (0 waits for ever), got "${raw.slice(0, 20)}"`,
    );
  }
  return Number(raw.trim());
}

/**
 * The options every kld connection to PostgreSQL opens with: the URL and
 * its connect timeout. One place, so that no pool or client is left
 * waiting without a bound.
 */
export function connectionOptions(url: string): {
  connectionString: string;
  connectionTimeoutMillis: number;
} {
  return { connectionString: url, connectionTimeoutMillis: connectTimeoutSeconds(url) * 1000 };
}
