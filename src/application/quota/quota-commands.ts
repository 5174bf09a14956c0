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
  QuotaRules,
} from '../../domain/quota';
import type { Caller } from '../command-context';
import { AggregateSpec, DeciderService } from '../decider.service';
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

/**
 * The quota governing a state, read from the rules' stream (not a read
 * model): a lock or commit is judged by the rules as they are, on any replica.
 */
export async function quotaOf(
  deciders: DeciderService,
  stateName: string,
): Promise<{ quota?: QuotaLimit }> {
  const { rules } = await deciders.state(QUOTAS, QUOTA_STREAM);
  const quota = effectiveQuota(Object.values(rules), stateName);
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
