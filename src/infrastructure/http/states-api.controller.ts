import { createHash } from 'node:crypto';
import { Controller, Get, HttpCode, Inject, Param, Post, Query, Req } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import type { Request } from 'express';
import { CommitStateCommand } from '../../application/state/state-commands';
import { DomainError } from '../../domain/shared/domain-error';
import { parseStateDocument } from '../../domain/terraform';
import { CONFIG } from '../../app/tokens';
import type { Config } from '../config/config';
import { LockSummary, ResourceReadModel } from '../read-models/resource-read-model';
import { StateReadModel, StateSummary } from '../read-models/state-read-model';
import { callerOf } from './caller';
import { parseJson, readBody } from './read-body';
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
    private readonly states: StateReadModel,
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
  async get(
    @Param('path') path: string[],
    @Query() query: Record<string, unknown>,
  ): Promise<unknown> {
    const route = parseRoute(path);
    switch (route.kind) {
      case 'history': {
        const versions = await this.states.history(route.state);
        if (!versions) throw notFound(route.state);
        return { state: route.state, versions };
      }
      case 'resources':
        return {
          state: route.state,
          resources: await this.resources.resources(
            route.state,
            optionalString(query.address_glob, 'address_glob'),
          ),
        };
      case 'resource':
        return {
          state: route.state,
          address: route.address,
          ...(await this.resources.resource(route.state, route.address, query.history === 'true')),
        };
      case 'diff': {
        const from = serialParam(query.from, 'from');
        if (from === null) throw invalid('from (a serial) is required');
        return {
          state: route.state,
          ...(await this.resources.diff(route.state, from, serialParam(query.to, 'to'))),
        };
      }
    }
  }

  /** `kl import`: a terraform POST recorded with source `import`. */
  @Post('states/*path')
  @HttpCode(200)
  async import(
    @Param('path') path: string[],
    @Query('lock_id') lockId: string | undefined,
    @Req() req: Request & { id?: string },
  ): Promise<{ state: string; version: number | null }> {
    if (path.length < 2 || path[path.length - 1] !== 'import') {
      throw new DomainError('REQUEST.NOT_FOUND', 'no such endpoint (POST <name>/import)');
    }
    const state = stateNameFrom(path.slice(0, -1));
    const body = await readBody(req, this.config.maxStateBytes, 'state');
    const document = parseStateDocument(parseJson(body, 'STATE.INVALID', 'state'));
    const checksum = createHash('sha256').update(body).digest('hex');
    const { version } = await this.commands.execute(
      new CommitStateCommand(state, document, checksum, lockId || null, 'import', callerOf(req)),
    );
    return { state, version };
  }
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

function serialParam(value: unknown, name: string): number | null {
  if (value === undefined || value === '') return null;
  if (typeof value !== 'string' || !/^\d{1,15}$/.test(value)) {
    throw invalid(`${name} must be a non-negative integer serial`);
  }
  return Number(value);
}

function optionalString(value: unknown, name: string): string | undefined {
  if (value === undefined || value === '') return undefined;
  if (typeof value !== 'string') throw invalid(`${name} must be given once`);
  return value;
}

function invalid(message: string): DomainError {
  return new DomainError('REQUEST.INVALID', message);
}

function notFound(state: string): DomainError {
  return new DomainError('STATE.NOT_FOUND', `no state named "${state}"`);
}
