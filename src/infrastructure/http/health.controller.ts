import { Controller, Get, Inject, Res } from '@nestjs/common';
import type { Response } from 'express';
import { DATABASE } from '../../app/tokens';
import { ProjectionRunner } from '../../projections/projection-runner';
import { Database } from '../postgres/database';
import { migrationsCurrent } from '../postgres/migrator';

@Controller()
export class HealthController {
  constructor(
    @Inject(DATABASE) private readonly db: Database,
    private readonly runner: ProjectionRunner,
  ) {}

  /** The process is up; says nothing about its dependencies. */
  @Get('healthz')
  health(): { status: string } {
    return { status: 'ok' };
  }

  /** Ready to serve: database reachable, schema current, read models caught up. */
  @Get('readyz')
  async ready(@Res() res: Response): Promise<void> {
    const checks = { database: false, migrations: false, projections: false };
    try {
      await this.db.query('SELECT 1');
      checks.database = true;
      checks.migrations = await migrationsCurrent((sql) => this.db.query(sql));
      checks.projections = checks.migrations && (await this.runner.caughtUp());
    } catch {
      // the failed check stays false
    }
    const ready = Object.values(checks).every(Boolean);
    res.status(ready ? 200 : 503).json({ status: ready ? 'ready' : 'not ready', checks });
  }
}
