import { Controller, Get, Query } from '@nestjs/common';
import {
  DashboardReadModel,
  DashboardState,
  DriftRow,
  Neighbours,
  ResourcePage,
  VersionChanges,
} from '../read-models/dashboard-read-model';
import {
  DashboardDependenciesQueryDto,
  DashboardResourcesQueryDto,
  DashboardStateQueryDto,
} from './dto/dashboard.dto';

/** The read routes only the web dashboard (`/ui`) needs; see docs/api.md. */
@Controller('v1/dashboard')
export class DashboardController {
  constructor(private readonly read: DashboardReadModel) {}

  @Get('states')
  async states(): Promise<{ states: DashboardState[] }> {
    return { states: await this.read.states() };
  }

  @Get('changes')
  async changes(@Query() query: DashboardStateQueryDto): Promise<{ changes: VersionChanges[] }> {
    return { changes: await this.read.changes(query.state) };
  }

  @Get('resources')
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
    );
  }

  @Get('dependencies')
  async dependencies(@Query() query: DashboardDependenciesQueryDto): Promise<Neighbours> {
    return this.read.neighbours(query.state, query.address);
  }

  @Get('drift')
  async drift(): Promise<{ drift: DriftRow[]; truncated: boolean }> {
    const { rows, truncated } = await this.read.drift();
    return { drift: rows, truncated };
  }
}
