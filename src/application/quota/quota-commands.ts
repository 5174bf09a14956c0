import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import {
  checkQuotaGlob,
  effectiveQuota,
  QUOTA_SNAPSHOT_SCHEMA,
  QUOTA_STREAM,
  QuotaCommand,
  quotaDecider,
  QuotaEvent,
  QuotaLimit,
  QUOTA_EXCEEDED,
  QuotaRules,
} from '../../domain/quota';
import { WrongExpectedRevisionError } from '../../domain/shared/concurrency-error';
import { DomainError } from '../../domain/shared/domain-error';
import type { StateAt } from '../aggregate-store';
import type { Caller } from '../command-context';
import { AggregateSpec, DeciderService, ReadFrom } from '../decider.service';
import { CommandWith } from '../props-message';

/** Every quota rule on one stream. */
export const QUOTAS: AggregateSpec<QuotaCommand, QuotaRules, QuotaEvent> = {
  name: 'quotas',
  decider: quotaDecider,
  streamOf: () => QUOTA_STREAM,
  snapshots: {
    schema: QUOTA_SNAPSHOT_SCHEMA,
    to: (state) => state,
    from: (json) => json as QuotaRules,
  },
  done: (command) =>
    command.type === 'SetQuota'
      ? `quota ${command.data.glob} set`
      : `quota ${command.data.glob} removed`,
};

// Rule changes racing one command, one after the other: it gives up only then.
const QUOTA_ATTEMPTS = 10;

/**
 * Runs a command judged by the quota governing the state, from the rules'
 * stream (not a read model), so it is judged by the rules as they are, on any
 * replica. The rules this process last saw are used without reading their
 * tail, and the command's append names their revision (`readFrom`): an append
 * made on rules another replica has since changed is refused, and the command
 * runs again on the rules read now. An answer without an append that the rules
 * decided (a refusal over quota) is given only on rules just read, as the
 * aggregate store does for its own stream.
 */
export async function withQuota<T>(
  deciders: DeciderService,
  stateName: string,
  run: (quota: { quota?: QuotaLimit }, readFrom: ReadFrom) => Promise<T>,
): Promise<T> {
  let warm = deciders.warmState(QUOTAS, QUOTA_STREAM);
  for (let attempt = 1; ; attempt++) {
    const rules = warm ?? (await deciders.stateAt(QUOTAS, QUOTA_STREAM));
    const unread = warm !== null;
    warm = null;
    const retried = (err: unknown): boolean => {
      const moved =
        err instanceof WrongExpectedRevisionError && err.metadata.streamId === QUOTA_STREAM;
      const refused = err instanceof DomainError && err.code === QUOTA_EXCEEDED;
      return (moved && attempt < QUOTA_ATTEMPTS) || (refused && unread);
    };
    try {
      return await run(quotaIn(rules, stateName), {
        at: { streamId: QUOTA_STREAM, revision: rules.revision },
        retried,
      });
    } catch (err) {
      if (!retried(err)) throw err;
    }
  }
}

function quotaIn({ state }: StateAt<QuotaRules>, stateName: string): { quota?: QuotaLimit } {
  const quota = effectiveQuota(Object.values(state.rules), stateName);
  return quota === undefined ? {} : { quota };
}

export class SetQuotaCommand extends CommandWith<
  { glob: string; maxResources: number; softResources: number | null; caller: Caller },
  { changed: boolean }
>() {}

export class RemoveQuotaCommand extends CommandWith<{ glob: string; caller: Caller }, void>() {}

@CommandHandler(SetQuotaCommand)
export class SetQuotaHandler implements ICommandHandler<SetQuotaCommand> {
  constructor(private readonly deciders: DeciderService) {}

  async execute(c: SetQuotaCommand): Promise<{ changed: boolean }> {
    const { events } = await this.deciders.execute(QUOTAS, {
      type: 'SetQuota',
      data: {
        glob: checkQuotaGlob(c.glob),
        maxResources: c.maxResources,
        softResources: c.softResources,
      },
      metadata: this.deciders.context(c.caller),
    });
    return { changed: events.length > 0 };
  }
}

@CommandHandler(RemoveQuotaCommand)
export class RemoveQuotaHandler implements ICommandHandler<RemoveQuotaCommand> {
  constructor(private readonly deciders: DeciderService) {}

  async execute(c: RemoveQuotaCommand): Promise<void> {
    await this.deciders.execute(QUOTAS, {
      type: 'RemoveQuota',
      data: { glob: checkQuotaGlob(c.glob) },
      metadata: this.deciders.context(c.caller),
    });
  }
}

export const QUOTA_COMMAND_HANDLERS = [SetQuotaHandler, RemoveQuotaHandler];
