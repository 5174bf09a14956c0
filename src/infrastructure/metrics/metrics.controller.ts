import { Controller, Get, Inject, Res } from '@nestjs/common';
import type { Response } from 'express';
import { METRICS, PrometheusMetrics } from './prometheus-metrics';

/** Prometheus's scrape target (docs/metrics.md). */
@Controller()
export class MetricsController {
  constructor(@Inject(METRICS) private readonly metrics: PrometheusMetrics) {}

  @Get('metrics')
  async scrape(@Res() res: Response): Promise<void> {
    const { contentType, body } = await this.metrics.scrape();
    res.status(200).type(contentType).send(body);
  }
}
