import { Controller, Get, Inject, Res } from '@nestjs/common';
import type { Response } from 'express';
import { PROJECTION_ADMIN, ProjectionAdmin } from '../../application/ports/projection-admin.port';
import { DATABASE, Database } from '../postgres/database';
import { packageVersion } from '../package-root';
import { migrationsCurrent } from '../postgres/migrator';
import { Access } from './access';

const KLD_VERSION = packageVersion();

@Controller()
@Access.public()
export class HealthController {
  constructor(
    @Inject(DATABASE) private readonly db: Database,
    @Inject(PROJECTION_ADMIN) private readonly runner: ProjectionAdmin,
  ) {}

  /** The process is up; says nothing about its dependencies. */
  @Get('healthz')
  health(): { status: string } {
    return { status: 'ok' };
  }

  /** Which kld answers (`kl version` prints it next to its own). */
  @Get('v1/version')
  version(): { version: string } {
    return { version: KLD_VERSION };
  }

  /**
   * Ready to serve: database reachable, schema current, read models caught
   * up. A projector halted at an event it cannot apply is named in `halted`
   * with that event (docs/operations.md).
   */
  @Get('readyz')
  async ready(@Res() res: Response): Promise<void> {
    // readModels: not emptied by a crash, or rebuilt since (unlogged-read-models.ts)
    const checks = {
      database: false,
      migrations: false,
      projections: false,
      readModels: !this.db.guard?.lost,
    };
    const halted = this.runner.halted();
    try {
      await this.db.query('SELECT 1');
      checks.database = true;
      checks.migrations = await migrationsCurrent((sql) => this.db.query(sql));
      checks.projections =
        checks.migrations && halted.length === 0 && (await this.runner.caughtUp());
    } catch {
      // the failed check stays false
    }
    const ready = Object.values(checks).every(Boolean);
    res.status(ready ? 200 : 503).json({
      status: ready ? 'ready' : 'not ready',
      checks,
      ...(halted.length ? { halted } : {}),
    });
  }
}
