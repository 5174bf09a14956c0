import { QUOTA_EXCEEDED } from '../quota/quota';
import { countedResources, overrunOf, QuotaLimit } from '../quota/quota-limits';
import { DomainError } from '../shared/domain-error';
import { LockInfo } from './lock-info';
import { StateEvent } from './state.events';
import { ActiveState } from './state.model';

/**
 * Refuses to start an apply (a terraform apply lock, a kl apply run that
 * writes) on a state already over its hard limit. Nothing that records
 * infrastructure is ever refused for quota; this only keeps a state that is
 * over from growing further. The answer is a LockInfo, as for a held lock.
 * Terraform 1.11 prints only its ID ("HTTP remote state already locked:
 * ID=…"; the Lock Info below that is the caller's own), so the ID is the
 * reason itself; Who and Info say it again for other clients.
 */
export function refuseOverQuota(
  active: ActiveState,
  quota: QuotaLimit | undefined,
  what: { operation: string; now: string },
): void {
  if (quota === undefined) return;
  const count = countedResources(active.instances.keys());
  if (overrunOf(quota, count) !== 'hard') return;
  const message =
    `state ${active.name} holds ${count} resources, over the hard limit ${quota.maxResources} ` +
    `of quota ${quota.glob}: applies are refused until an admin raises the limit ` +
    `(kl quota set) or the state shrinks; plans still work`;
  const holder: LockInfo = {
    ID:
      `quota exceeded: state ${active.name} holds ${count} resources, over the hard limit ` +
      `${quota.maxResources} of quota ${quota.glob}; plans still work, an admin can raise it (kl quota set)`,
    Operation: what.operation,
    Who: `kilolock quota ${quota.glob} (max ${quota.maxResources} resources, state holds ${count})`,
    Info: message,
    Version: '',
    Created: what.now,
    Path: active.name,
  };
  throw new DomainError(QUOTA_EXCEEDED, message, { holder });
}

/** The overrun a new version records, if its count is over the quota's hard or soft limit. */
export function quotaOverrun(
  active: ActiveState,
  quota: QuotaLimit | undefined,
  version: number,
  count: number,
): StateEvent[] {
  if (quota === undefined) return [];
  const level = overrunOf(quota, count);
  if (level === null) return [];
  return [
    {
      type: 'QuotaExceeded',
      data: {
        stateId: active.stateId,
        name: active.name,
        version,
        glob: quota.glob,
        level,
        limit: level === 'hard' ? quota.maxResources : (quota.softResources as number),
        count,
      },
    },
  ];
}
