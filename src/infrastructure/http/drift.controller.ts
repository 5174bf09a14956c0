import { Controller, Get, Query } from '@nestjs/common';
import { DomainError } from '../../domain/shared/domain-error';
import { STATE_NOT_FOUND } from '../../domain/state';
import { DriftEntry, RefreshReadModel } from '../read-models/refresh-read-model';
import { DriftQueryDto } from './dto/refresh-run.dto';
import { Access, stateInQuery } from './access';

/** `current_resource_drift` of one state, over REST (`kl drift`). */
@Controller('v1/drift')
export class DriftController {
  constructor(private readonly read: RefreshReadModel) {}

  @Get()
  @Access.state('read', stateInQuery)
  async drift(@Query() query: DriftQueryDto): Promise<{ drift: DriftEntry[] }> {
    const name = query.state;
    // An empty list must mean "no drift", never "no such state".
    if (!(await this.read.stateExists(name))) {
      throw new DomainError(STATE_NOT_FOUND, `state ${name} does not exist`);
    }
    return { drift: await this.read.drift(name) };
  }
}
