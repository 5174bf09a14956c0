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
