import { Readable } from 'node:stream';
import type { CommandBus } from '@nestjs/cqrs';
import type { Request } from 'express';
import { AbortApplyRunHandler } from '../../application/apply-runs/apply-run-command.handlers';
import type { AbortApplyRunCommand } from '../../application/apply-runs/apply-run-commands';
import type { ApplyRunLookup } from '../../application/apply-runs/apply-run-read.port';
import type { DeciderService } from '../../application/decider.service';
import type { Clock } from '../../application/ports/clock.port';
import { Grants, parseScope } from '../../domain/auth';
import type { Config } from '../config/config';
import type { ApplyReadModel } from '../read-models/apply-read-model';
import type { StateCatalogReadModel } from '../read-models/state-catalog-read-model';
import { ApplyRunsController } from './apply-runs.controller';

/** A request with no body, from a token with these scopes. */
function requestFrom(scopes: string[]): Request {
  return Object.assign(Readable.from([]), {
    header: () => undefined,
    principal: { name: 'ci', username: null, grants: Grants.of(scopes.map(parseScope)) },
  }) as unknown as Request;
}

describe('ApplyRunsController abort by run id', () => {
  it('refuses a token of another state even while the read models have not seen the run, and writes nothing', async () => {
    // As if the run did not exist, naming no state: the id tells that token nothing.
    const writes: unknown[] = [];
    const deciders = {
      // The run's own stream: it runs on prod.
      state: async () => ({ status: 'running', started: { stateName: 'prod' } }),
      context: () => ({}),
      execute: async (_aggregate: unknown, command: unknown) => {
        writes.push(command);
        return { events: [], state: {} };
      },
    } as unknown as DeciderService;
    const lookup: ApplyRunLookup = { stateOfRun: async () => 'prod' };
    const handler = new AbortApplyRunHandler(deciders, lookup);
    const bus = {
      execute: (c: AbortApplyRunCommand) => handler.execute(c),
    } as unknown as CommandBus;
    // The apply_runs projection is behind: it knows no such run yet.
    const runs = { run: async () => null } as unknown as ApplyReadModel;
    const controller = new ApplyRunsController(
      bus,
      runs,
      {} as StateCatalogReadModel,
      {} as Config,
      {} as Clock,
    );
    const runId = '6f1f7a52-3c1e-4a53-9a56-0d8c8f1e2a11';
    await expect(
      controller.abortAnywhere(runId, requestFrom(['write:dev/*'])),
    ).rejects.toMatchObject({
      code: 'APPLY.NOT_FOUND',
      message: `apply run ${runId} does not exist`,
    });
    // A token that may read the run's state learns nothing new from a 403.
    await expect(
      controller.abortAnywhere(runId, requestFrom(['read:prod', 'write:dev/*'])),
    ).rejects.toMatchObject({ code: 'AUTH.FORBIDDEN' });
    expect(writes).toEqual([]);
  });
});
