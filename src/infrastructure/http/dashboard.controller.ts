import { Controller, Get, Query, Req } from '@nestjs/common';
import type { Request } from 'express';
import type {
  Facets,
  DriftRow,
  Neighbours,
  ResourcePage,
  StatePage,
  VersionChanges,
} from '../../domain/wire/dashboard';
import { DashboardReadModel } from '../read-models/dashboard-read-model';
import {
  DashboardDependenciesQueryDto,
  DashboardResourcesQueryDto,
  DashboardStateQueryDto,
  DashboardStatesQueryDto,
} from './dto/dashboard.dto';
import { Access, readablePatterns, stateInQuery } from './access';

/** The read routes only the web dashboard (`/ui`) needs; see docs/api.md. */
@Controller('v1/dashboard')
export class DashboardController {
  constructor(private readonly read: DashboardReadModel) {}

  @Get('states')
  @Access.anyState('read')
  async states(@Req() req: Request, @Query() query: DashboardStatesQueryDto): Promise<StatePage> {
    return this.read.states(readablePatterns(req), {
      glob: query.glob || undefined,
      sort: query.sort,
      desc: query.order === 'desc',
      offset: query.offset,
      limit: query.limit,
    });
  }

  @Get('changes')
  @Access.state('read', stateInQuery)
  async changes(@Query() query: DashboardStateQueryDto): Promise<{ changes: VersionChanges[] }> {
    return { changes: await this.read.changes(query.state) };
  }

  @Get('resources')
  @Access.state('read', stateInQuery)
  async resources(@Query() query: DashboardResourcesQueryDto): Promise<ResourcePage> {
    return this.read.resources(
      query.state,
      {
        // An empty filter is no filter, except `module=`: the root module's path is ''.
        type: query.type || undefined,
        module: query.module,
        provider: query.provider || undefined,
        addressGlob: query.address_glob || undefined,
      },
      query.offset ?? 0,
      query.limit ?? 100,
      query.facets ?? true,
    );
  }

  @Get('resource-facets')
  @Access.state('read', stateInQuery)
  async resourceFacets(@Query() query: DashboardStateQueryDto): Promise<{ facets: Facets }> {
    return { facets: await this.read.facets(query.state) };
  }

  @Get('dependencies')
  @Access.state('read', stateInQuery)
  async dependencies(@Query() query: DashboardDependenciesQueryDto): Promise<Neighbours> {
    return this.read.neighbours(query.state, query.address);
  }

  @Get('drift')
  @Access.anyState('read')
  async drift(@Req() req: Request): Promise<{ drift: DriftRow[]; truncated: boolean }> {
    const { rows, truncated } = await this.read.drift(readablePatterns(req));
    return { drift: rows, truncated };
  }
}
