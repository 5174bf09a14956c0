import { Controller, HttpCode, Post } from '@nestjs/common';
import { ProjectionRunner } from '../../projections/projection-runner';

@Controller('v1/admin')
export class AdminController {
  constructor(private readonly runner: ProjectionRunner) {}

  /** Empties every read model and replays the event log into it. */
  @Post('projections/rebuild')
  @HttpCode(200)
  async rebuild(): Promise<{ projectors: { projector: string; events: number }[] }> {
    return { projectors: await this.runner.rebuild() };
  }
}
