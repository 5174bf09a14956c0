import { Controller, Get, Query } from '@nestjs/common';
import { DomainError } from '../../domain/shared/domain-error';
import {
  DashboardReadModel,
  DashboardState,
  DriftRow,
  Neighbours,
  ResourcePage,
  VersionChanges,
} from '../read-models/dashboard-read-model';
import { stateNameFrom } from './state-name';

const MAX_PAGE = 500;

/** The read routes only the web dashboard (`/ui`) needs; see docs/api.md. */
@Controller('v1/dashboard')
export class DashboardController {
  constructor(private readonly read: DashboardReadModel) {}

  @Get('states')
  async states(): Promise<{ states: DashboardState[] }> {
    return { states: await this.read.states() };
  }

  @Get('changes')
  async changes(@Query() query: Record<string, unknown>): Promise<{ changes: VersionChanges[] }> {
    return { changes: await this.read.changes(stateNameFrom(one(query, 'state'))) };
  }

  @Get('resources')
  async resources(@Query() query: Record<string, unknown>): Promise<ResourcePage> {
    return this.read.resources(
      stateNameFrom(one(query, 'state')),
      {
        type: one(query, 'type'),
        // `module=` (empty) is the root module's path.
        module: query.module === '' ? '' : one(query, 'module'),
        provider: one(query, 'provider'),
        addressGlob: one(query, 'address_glob'),
      },
      integer(query, 'offset', 0, Number.MAX_SAFE_INTEGER) ?? 0,
      integer(query, 'limit', 1, MAX_PAGE) ?? 100,
    );
  }

  @Get('dependencies')
  async dependencies(@Query() query: Record<string, unknown>): Promise<Neighbours> {
    const address = one(query, 'address');
    if (address === undefined) throw invalid('address is required');
    return this.read.neighbours(stateNameFrom(one(query, 'state')), address);
  }

  @Get('drift')
  async drift(): Promise<{ drift: DriftRow[]; truncated: boolean }> {
    const { rows, truncated } = await this.read.drift();
    return { drift: rows, truncated };
  }
}

/** A query parameter given at most once; `''` counts as absent (an empty filter). */
function one(query: Record<string, unknown>, name: string): string | undefined {
  const value = query[name];
  if (value === undefined || value === '') return undefined;
  if (typeof value !== 'string') throw invalid(`${name} must be given once`);
  return value;
}

function integer(
  query: Record<string, unknown>,
  name: string,
  min: number,
  max: number,
): number | undefined {
  const value = one(query, name);
  if (value === undefined) return undefined;
  const n = /^\d{1,16}$/.test(value) ? Number(value) : NaN;
  if (!(n >= min && n <= max)) throw invalid(`${name} must be an integer from ${min} to ${max}`);
  return n;
}

function invalid(message: string): DomainError {
  return new DomainError('REQUEST.INVALID', message);
}
