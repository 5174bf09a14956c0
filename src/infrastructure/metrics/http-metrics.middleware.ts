import type { NextFunction, Request, Response } from 'express';
import type { PrometheusMetrics } from './prometheus-metrics';

/**
 * Times every request by its route template (`/v1/states/*name`, never the
 * state's name: one series per route, not per state). A request no route
 * took (a 404, or refused by a middleware) is `route="(none)"`.
 */
export function httpMetrics(metrics: PrometheusMetrics) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const end = metrics.httpDuration.startTimer();
    res.on('finish', () => {
      const route = (req.route as { path?: unknown } | undefined)?.path;
      end({
        method: req.method,
        route: typeof route === 'string' ? `${req.baseUrl}${route}` : '(none)',
        status: String(res.statusCode),
      });
    });
    next();
  };
}
