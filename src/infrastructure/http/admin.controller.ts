import { Controller, HttpCode, Post } from '@nestjs/common';
import { ProjectionRunner } from '../../projections/projection-runner';

@Controller('v1/admin')
export class AdminController {
  constructor(private readonly runner: ProjectionRunner) {}

  /** Replays the event log into fresh read models and swaps them in (ProjectionRunner.rebuild). */
  @Post('projections/rebuild')
  @HttpCode(200)
  async rebuild(): Promise<{ projectors: { projector: string; events: number }[] }> {
    return { projectors: await this.runner.rebuild() };
  }
}
