import { Controller, Get, Inject, Res } from '@nestjs/common';
import type { Response } from 'express';
import { Access } from '../http/access';
import { METRICS, PrometheusMetrics } from './prometheus-metrics';

/**
 * Prometheus's scrape target (docs/metrics.md). With authentication on, a
 * token with the `metrics` scope: a scraper needs no admin, and no label
 * carries a state's data, a token or a secret.
 */
@Controller()
export class MetricsController {
  constructor(@Inject(METRICS) private readonly metrics: PrometheusMetrics) {}

  @Get('metrics')
  @Access.metrics()
  async scrape(@Res() res: Response): Promise<void> {
    const { contentType, body } = await this.metrics.scrape();
    res.status(200).type(contentType).send(body);
  }
}
