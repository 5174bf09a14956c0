/** Bounds of `POST /v1/query`; `kl query` checks its flags against the same numbers. */
export const QUERY_LIMITS = {
  defaultMaxRows: 10_000,
  maxMaxRows: 100_000,
  defaultTimeoutMs: 30_000,
  // The role's own statement_timeout (migrations/003) is 5 min; stay inside it.
  maxTimeoutMs: 300_000,
  maxParams: 1000,
  /**
   * What PostgreSQL may send for one query (reply-budget). Its JSON is at
   * most about 6 times that (every byte a control character, written
   * \u0001), which stays within V8's longest string.
   */
  maxReplyBytes: 64 * 2 ** 20,
};
