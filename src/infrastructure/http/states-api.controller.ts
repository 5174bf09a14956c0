import { Body, Controller, Get, HttpCode, Inject, Param, Post, Query, Req } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import type { Request } from 'express';
import { CommitStateCommand, UnlockStateCommand } from '../../application/state/state-commands';
import { DomainError } from '../../domain/shared/domain-error';
import { STATE_LINEAGE_CONFLICT, STATE_SERIAL_CONFLICT } from '../../domain/state';
import { CONFIG, type Config } from '../config/config';
import type { LockSummary } from '../../domain/wire/states';
import { ResourceReadModel } from '../read-models/resource-read-model';
import { StateCatalogReadModel, StateSummary } from '../read-models/state-catalog-read-model';
import type { VersionSelector } from '../read-models/state-document-read-model';
import { Access, readablePatterns, requireScope } from './access';
import { callerOf } from './caller';
import { ForceUnlockDto, ImportQueryDto, StatesApiQueryDto } from './dto/states-api.dto';
import { JsonBody } from './json-body';
import { receiveStateDocument } from './receive-state-document';
import { stateNameFrom } from './state-name';

/**
 * The JSON API behind `kl`: `<name>/history`, `<name>/diff`,
 * `<name>/resources[/<address>]`, `<name>/import`, `<name>/force-unlock`.
 * A path no route takes is Nest's 404 (REQUEST.NOT_FOUND).
 */
@Controller('v1/api')
export class StatesApiController {
  constructor(
    private readonly commands: CommandBus,
    private readonly states: StateCatalogReadModel,
    private readonly resources: ResourceReadModel,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  @Get('states')
  @Access.anyState('read')
  async list(@Req() req: Request): Promise<{ states: StateSummary[] }> {
    return { states: await this.states.listStates(readablePatterns(req)) };
  }

  @Get('locks')
  @Access.anyState('read')
  async locks(@Req() req: Request): Promise<{ locks: LockSummary[] }> {
    return { locks: await this.resources.locks(readablePatterns(req)) };
  }

  /**
   * Routes under `<name>/` name their action last (state names contain
   * slashes), each its own route so that other controllers' routes under
   * `states/` (apply runs, reservations) are never shadowed.
   */
  @Get('states/*path/history')
  @Access.state('read', pathState)
  async history(@Param('path') path: string[]): Promise<unknown> {
    const state = stateNameFrom(path);
    const history = await this.states.history(state);
    if (!history) throw notFound(state);
    return { state, ...history };
  }

  @Get('states/*path/resources')
  @Access.state('read', pathState)
  async resourceList(
    @Param('path') path: string[],
    @Query() query: StatesApiQueryDto,
  ): Promise<unknown> {
    const state = stateNameFrom(path);
    return {
      state,
      resources: await this.resources.resources(
        state,
        query.address_glob || undefined,
        query.version,
      ),
    };
  }

  /** The address is percent-encoded as one segment: instance keys may contain slashes. */
  @Get('states/*path/resources/:address')
  @Access.state('read', pathState)
  async resource(
    @Param('path') path: string[],
    @Param('address') address: string,
    @Query() query: StatesApiQueryDto,
  ): Promise<unknown> {
    const state = stateNameFrom(path);
    return {
      state,
      address,
      ...(await this.resources.resource(state, address, query.history ?? false, query.version)),
    };
  }

  @Get('states/*path/diff')
  @Access.state('read', pathState)
  async diff(@Param('path') path: string[], @Query() query: StatesApiQueryDto): Promise<unknown> {
    const state = stateNameFrom(path);
    const from = selector(query, 'from');
    if (from === null) throw invalid('from (a serial) or from_version is required');
    return { state, ...(await this.resources.diff(state, from, selector(query, 'to'))) };
  }

  /**
   * `<name>/force-unlock` (`kl force-unlock`): releases the lock, or with
   * `{"lock_id": …}` only that lock (409 with the holder if another holds it).
   */
  @Post('states/*path/force-unlock')
  @HttpCode(200)
  @Access.state('write', pathState)
  @JsonBody({ what: 'force-unlock request', limit: 'maxLockBytes', emptyIsObject: true })
  async forceUnlock(
    @Param('path') path: string[],
    @Body() body: ForceUnlockDto,
    @Req() req: Request & { id?: string },
  ): Promise<{ state: string; released: string | null }> {
    const state = stateNameFrom(path);
    requireScope(req, 'admin', `releasing the lock of state ${state} whoever holds it`);
    const { released } = await this.commands.execute(
      new UnlockStateCommand({
        name: state,
        lockId: body.lock_id ?? null,
        forced: true,
        caller: callerOf(req),
      }),
    );
    return { state, released };
  }

  /**
   * `<name>/import` (`kl import`): a terraform POST recorded with source
   * `import`, refused (409) if its lineage differs from the current
   * version's or its serial is older, unless `?force=true`. The body is a
   * state document, read raw like terraform's.
   */
  @Post('states/*path/import')
  @HttpCode(200)
  @Access.state('write', pathState)
  async import(
    @Param('path') path: string[],
    @Query() query: ImportQueryDto,
    @Req() req: Request & { id?: string },
  ): Promise<{ state: string; version: number | null }> {
    const state = stateNameFrom(path);
    const { document, checksum, bytes } = await receiveStateDocument(
      req,
      this.config.maxStateBytes,
    );
    const { version } = await this.commands
      .execute(
        new CommitStateCommand({
          name: state,
          document,
          checksum,
          bytes,
          lockId: query.lock_id || null,
          source: 'import',
          caller: callerOf(req),
          checkContinuity: !query.force,
        }),
      )
      .catch((err: unknown) => {
        throw withForceHint(err);
      });
    return { state, version };
  }
}

/** A lineage or serial refusal says how to import anyway, from kl and over HTTP. */
function withForceHint(err: unknown): unknown {
  if (
    !(err instanceof DomainError) ||
    (err.code !== STATE_LINEAGE_CONFLICT && err.code !== STATE_SERIAL_CONFLICT)
  ) {
    return err;
  }
  return new DomainError(
    err.code,
    `${err.message}; nothing imported (kl import --force, or ?force=true, imports it anyway)`,
    err.metadata,
  );
}

/** The state a `<name>/<action>` route names. */
function pathState(req: Request): string {
  return stateNameFrom(req.params.path as unknown as string[]);
}

/** `<side>` (a terraform serial) or `<side>_version` (ours), not both. */
function selector(query: StatesApiQueryDto, side: 'from' | 'to'): VersionSelector | null {
  const serial = query[side];
  const version = query[`${side}_version`];
  if (serial !== undefined && version !== undefined) {
    throw invalid(`give ${side} or ${side}_version, not both`);
  }
  return serial !== undefined ? { serial } : version !== undefined ? { version } : null;
}

function invalid(message: string): DomainError {
  return new DomainError('REQUEST.INVALID', message);
}

function notFound(state: string): DomainError {
  return new DomainError('STATE.NOT_FOUND', `no state named "${state}"`);
}
