/**
 * The heavy kinds of request, each bounded per caller (docs/security.md,
 * "Slow, silent and greedy clients"). Terraform's own routes are none of
 * them: its http backend is not refused here, whatever a caller does.
 */
export const HEAVY_KINDS = ['query', 'export', 'subscription', 'engine', 'run'] as const;
export type HeavyKind = (typeof HEAVY_KINDS)[number];

/** How many of each kind one caller may have in flight in one kld process. */
export type CallerLimits = Record<HeavyKind, number>;

/** The variable that sets each bound (README, Configuration). */
export const CALLER_LIMIT_VARIABLES: Record<HeavyKind, string> = {
  query: 'KL_CALLER_QUERIES',
  export: 'KL_CALLER_EXPORTS',
  subscription: 'KL_CALLER_SUBSCRIPTIONS',
  engine: 'KL_CALLER_ENGINE_REQUESTS',
  run: 'KL_CALLER_RUN_REQUESTS',
};

/**
 * Defaults above honest use (several CI jobs on one token at once), and
 * below what starves everyone else of the pool each kind draws on: queries
 * run on a reader pool of 10 connections, the rest on kld's pool of 20
 * (bench/caller-flood.ts: 16 scope+slice requests of a 20,000-instance
 * state left terraform's GET a 503, 16 subscriptions reading the log from
 * its start held a LOCK 15 s).
 */
export const DEFAULT_CALLER_LIMITS: CallerLimits = {
  query: 5,
  export: 4,
  subscription: 8,
  engine: 4,
  run: 8,
};

/** The variable that sets each bound across callers (README, Configuration). */
export const TOTAL_LIMIT_VARIABLES: Record<HeavyKind, string> = {
  query: 'KL_TOTAL_QUERIES',
  export: 'KL_TOTAL_EXPORTS',
  subscription: 'KL_TOTAL_SUBSCRIPTIONS',
  engine: 'KL_TOTAL_ENGINE_REQUESTS',
  run: 'KL_TOTAL_RUN_REQUESTS',
};

/**
 * How many of each kind all callers together may have in flight in one kld
 * process: many tokens, each within its own bound, must not fill what
 * terraform's requests draw on either. Queries: the reader pool's 10
 * connections (an 11th would wait for one and fail, 503); state-engine
 * requests and run starts: under kld's pool of 20, so terraform's GET
 * always finds a connection; exports: twice one caller's, their reads
 * queue on a pool of their own; subscriptions: most of them sit at the live
 * tail and cost little, but each may buffer up to 64 MB of events it has
 * not taken yet.
 */
export const DEFAULT_TOTAL_LIMITS: CallerLimits = {
  query: 10,
  export: 8,
  subscription: 256,
  engine: 10,
  run: 16,
};
