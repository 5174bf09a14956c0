import { isStateGlob } from '../auth/scopes';
import type { Decider } from '../shared/decider';
import { DomainError } from '../shared/domain-error';
import type { CommandContext, DomainEvent } from '../shared/event';
import { QuotaLimit } from './quota-limits';

export const QUOTA_INVALID = 'QUOTA.INVALID';
export const QUOTA_NOT_FOUND = 'QUOTA.NOT_FOUND';
/** A terraform apply lock or a kl apply run on a state over its hard limit. */
export const QUOTA_EXCEEDED = 'QUOTA.EXCEEDED';

/** All quota rules live on one stream: a rule change is decided against every other rule. */
export const QUOTA_STREAM = 'quotas';

/** The largest limit accepted: far above any real state, and an int4 column holds it. */
export const MAX_QUOTA = 1_000_000_000;

export const QuotaEventType = {
  QuotaSet: 'QuotaSet',
  QuotaRemoved: 'QuotaRemoved',
} as const;

export const QUOTA_EVENT_TYPES: readonly string[] = Object.values(QuotaEventType);

export type QuotaSet = DomainEvent<'QuotaSet', QuotaLimit>;
export type QuotaRemoved = DomainEvent<'QuotaRemoved', { glob: string }>;
export type QuotaEvent = QuotaSet | QuotaRemoved;

export type SetQuota = { type: 'SetQuota'; data: QuotaLimit; metadata: CommandContext };
export type RemoveQuota = { type: 'RemoveQuota'; data: { glob: string }; metadata: CommandContext };
export type QuotaCommand = SetQuota | RemoveQuota;

/** glob → its limits; plain JSON, so it is its own snapshot. */
export interface QuotaRules {
  rules: Record<string, QuotaLimit>;
}

function invalid(message: string): DomainError {
  return new DomainError(QUOTA_INVALID, message);
}

/** A quota's glob is a state-name glob, as in scopes (`team-a/*`, `team-?/prod`). */
export function checkQuotaGlob(glob: string): string {
  if (!isStateGlob(glob)) {
    throw invalid(
      `"${glob.slice(0, 100)}" is not a state-name glob: letters, digits, . _ @ + = - / and the wildcards * and ?, not starting or ending with /`,
    );
  }
  return glob;
}

function checkLimits(d: QuotaLimit): void {
  const { maxResources: max, softResources: soft } = d;
  if (!Number.isSafeInteger(max) || max < 1 || max > MAX_QUOTA) {
    throw invalid(`--max-resources must be a whole number from 1 to ${MAX_QUOTA}, got ${max}`);
  }
  if (soft !== null) {
    if (!Number.isSafeInteger(soft) || soft < 1) {
      throw invalid(`--soft must be a whole number of at least 1, got ${soft}`);
    }
    if (soft >= max) {
      throw invalid(
        `--soft (${soft}) must be below --max-resources (${max}): the soft limit warns before the hard one`,
      );
    }
  }
}

function set(command: SetQuota, state: QuotaRules): QuotaEvent[] {
  const d = command.data;
  checkQuotaGlob(d.glob);
  checkLimits(d);
  const before = state.rules[d.glob];
  // Setting what is already set is not news.
  if (before && before.maxResources === d.maxResources && before.softResources === d.softResources)
    return [];
  return [
    {
      type: 'QuotaSet',
      data: { glob: d.glob, maxResources: d.maxResources, softResources: d.softResources },
    },
  ];
}

function remove(command: RemoveQuota, state: QuotaRules): QuotaEvent[] {
  const { glob } = command.data;
  if (!Object.hasOwn(state.rules, glob)) {
    throw new DomainError(
      QUOTA_NOT_FOUND,
      `no quota on "${glob.slice(0, 100)}" (see kl quota rules)`,
    );
  }
  return [{ type: 'QuotaRemoved', data: { glob } }];
}

export const quotaDecider: Decider<QuotaCommand, QuotaRules, QuotaEvent> = {
  decide(command, state) {
    switch (command.type) {
      case 'SetQuota':
        return set(command, state);
      case 'RemoveQuota':
        return remove(command, state);
      default: {
        const never: never = command;
        throw new Error(`unexpected ${JSON.stringify(never)}`);
      }
    }
  },
  evolve(state, event) {
    switch (event.type) {
      case 'QuotaSet':
        return { rules: { ...state.rules, [event.data.glob]: { ...event.data } } };
      case 'QuotaRemoved': {
        const rules = { ...state.rules };
        delete rules[event.data.glob];
        return { rules };
      }
      default: {
        const never: never = event;
        throw new Error(`unexpected ${JSON.stringify(never)}`);
      }
    }
  },
  initialState: () => ({ rules: {} }),
};

export const QUOTA_SNAPSHOT_SCHEMA = 'quotas/1';
