import { Body, Controller, Get, HttpCode, Inject, Param, Post, Query, Req } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import type { Request } from 'express';
import { CommitStateCommand, UnlockStateCommand } from '../../application/state/state-commands';
import { DomainError } from '../../domain/shared/domain-error';
import { STATE_LINEAGE_CONFLICT, STATE_SERIAL_CONFLICT } from '../../domain/state';
import { CONFIG, type Config } from '../config/config';
import { LockSummary, ResourceReadModel } from '../read-models/resource-read-model';
import { StateCatalogReadModel, StateSummary } from '../read-models/state-catalog-read-model';
import type { VersionSelector } from '../read-models/state-document-read-model';
import { callerOf } from './caller';
import { ForceUnlockDto, ImportQueryDto, StatesApiQueryDto } from './dto/states-api.dto';
import { JsonBody } from './json-body';
import { readBody } from './read-body';
import { receiveStateDocument } from './receive-state-document';
import { stateNameFrom } from './state-name';

type Route =
  | { kind: 'history'; state: string }
  | { kind: 'resources'; state: string }
  | { kind: 'resource'; state: string; address: string }
  | { kind: 'diff'; state: string };

/**
 * The JSON API behind `kl`. State names contain slashes, so the route is
 * parsed from the end: `<name>/history`, `<name>/diff`, `<name>/resources`,
 * `<name>/resources/<address>` (the address percent-encoded as one segment:
 * instance keys may contain slashes).
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
  async list(): Promise<{ states: StateSummary[] }> {
    return { states: await this.states.listStates() };
  }

  @Get('locks')
  async locks(): Promise<{ locks: LockSummary[] }> {
    return { locks: await this.resources.locks() };
  }

  @Get('states/*path')
  async get(@Param('path') path: string[], @Query() query: StatesApiQueryDto): Promise<unknown> {
    const route = parseRoute(path);
    switch (route.kind) {
      case 'history': {
        const history = await this.states.history(route.state);
        if (!history) throw notFound(route.state);
        return { state: route.state, ...history };
      }
      case 'resources':
        return {
          state: route.state,
          resources: await this.resources.resources(
            route.state,
            query.address_glob || undefined,
            query.version,
          ),
        };
      case 'resource':
        return {
          state: route.state,
          address: route.address,
          ...(await this.resources.resource(
            route.state,
            route.address,
            query.history ?? false,
            query.version,
          )),
        };
      case 'diff': {
        const from = selector(query, 'from');
        if (from === null) throw invalid('from (a serial) or from_version is required');
        return {
          state: route.state,
          ...(await this.resources.diff(route.state, from, selector(query, 'to'))),
        };
      }
    }
  }

  /**
   * `<name>/force-unlock` (`kl force-unlock`): releases the lock, or with
   * `{"lock_id": …}` only that lock (409 with the holder if another holds it).
   */
  @Post('states/*path/force-unlock')
  @HttpCode(200)
  @JsonBody({ what: 'force-unlock request', limit: 'maxLockBytes', emptyIsObject: true })
  async forceUnlock(
    @Param('path') path: string[],
    @Body() body: ForceUnlockDto,
    @Req() req: Request & { id?: string },
  ): Promise<{ state: string; released: string | null }> {
    const state = stateNameFrom(path);
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
  async import(
    @Param('path') path: string[],
    @Query() query: ImportQueryDto,
    @Req() req: Request & { id?: string },
  ): Promise<{ state: string; version: number | null }> {
    const state = stateNameFrom(path);
    const { document, checksum } = await receiveStateDocument(
      await readBody(req, this.config.maxStateBytes, 'state'),
    );
    const { version } = await this.commands
      .execute(
        new CommitStateCommand({
          name: state,
          document,
          checksum,
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

  @Post('states/*path')
  notFound(): never {
    throw new DomainError(
      'REQUEST.NOT_FOUND',
      'no such endpoint: POST <name>/import or <name>/force-unlock',
    );
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

function parseRoute(path: string[]): Route {
  const last = path[path.length - 1];
  if (path.length >= 2 && (last === 'history' || last === 'resources' || last === 'diff')) {
    return { kind: last, state: stateNameFrom(path.slice(0, -1)) };
  }
  if (path.length >= 3 && path[path.length - 2] === 'resources') {
    return { kind: 'resource', state: stateNameFrom(path.slice(0, -2)), address: last };
  }
  throw new DomainError(
    'REQUEST.NOT_FOUND',
    'no such endpoint: use <name>/history, <name>/resources[/<address>] or <name>/diff',
  );
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
