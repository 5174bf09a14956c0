import { Controller, HttpCode, Inject, Post, Req } from '@nestjs/common';
import type { Request } from 'express';
import { DomainError } from '../../domain/shared/domain-error';
import { textProblem } from '../../domain/shared/storable-text';
import { PROJECTION_ADMIN, ProjectionAdmin } from '../../application/ports/projection-admin.port';
import { parseJson, readBody } from './read-body';

@Controller('v1/admin')
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
  async skip(@Req() req: Request) {
    const body = parseJson(await readBody(req, 64 * 1024, 'skip'), 'REQUEST.INVALID', 'skip');
    const { projector, position, reason } = (body ?? {}) as Record<string, unknown>;
    if (typeof projector !== 'string') throw invalid('projector must be a string');
    if (typeof position !== 'number' || !Number.isSafeInteger(position) || position < 1) {
      throw invalid('position must be a positive integer (event_log.position)');
    }
    if (typeof reason !== 'string' || reason.trim() === '' || textProblem(reason) !== null) {
      throw invalid('reason must be a non-empty string: say why the event is skipped');
    }
    return this.runner.skip(projector, BigInt(position), reason);
  }
}

function invalid(message: string): DomainError {
  return new DomainError('REQUEST.INVALID', message);
}
