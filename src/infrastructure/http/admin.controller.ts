import { Body, Controller, HttpCode, Inject, Post } from '@nestjs/common';
import { PROJECTION_ADMIN, ProjectionAdmin } from '../../application/ports/projection-admin.port';
import { SkipEventDto } from './dto/admin.dto';
import { JsonBody } from './json-body';
import { Access } from './access';

@Controller('v1/admin')
@Access.admin()
export class AdminController {
  constructor(@Inject(PROJECTION_ADMIN) private readonly runner: ProjectionAdmin) {}

  /** Replays the event log into fresh read models and swaps them in (ProjectionAdmin.rebuild). */
  @Post('projections/rebuild')
  @HttpCode(200)
  async rebuild(): Promise<{ projectors: { projector: string; events: number }[] }> {
    // An event a projector cannot apply is PROJECTIONS.CANNOT_APPLY: the operator's to skip.
    return { projectors: await this.runner.rebuild() };
  }

  /**
   * `{"projector": "state-catalog", "position": 1234, "reason": "…"}`: that
   * projector passes over the event from now on (docs/operations.md).
   */
  @Post('projections/skip')
  @HttpCode(200)
  @JsonBody({ what: 'skip', limit: 64 * 1024 })
  skip(@Body() body: SkipEventDto) {
    return this.runner.skip(body.projector, BigInt(body.position), body.reason);
  }
}
