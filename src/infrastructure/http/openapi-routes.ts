import type { NestExpressApplication } from '@nestjs/platform-express';
import type { Express, RequestHandler, Router } from 'express';

/**
 * `/openapi.json` and `/docs` (the Swagger UI and its files), routed at
 * start but built by the first request for one of them: the document
 * builder and @nestjs/swagger (about a fifth of the packages kld loads, for
 * pages few callers ask for) are loaded then, not by every start of kld.
 * The routes are registered now, ahead of Nest's routes and its 404 (added
 * when the app listens): one added on the first request would never be reached.
 */
export function serveOpenApi(app: NestExpressApplication): void {
  let router: Promise<Router> | null = null;
  const serve: RequestHandler = (req, res, next) => {
    router ??= import('./openapi').then(({ openApiRouter }) => openApiRouter(app));
    router.then((r) => r(req, res, next), next);
  };
  const http = app.getHttpAdapter().getInstance() as Express;
  http.get('/openapi.json', serve);
  http.get('/docs', serve);
  // The UI's files are no route of ours: a middleware, as the static files it hands them to
  // (metrics count a missing one as no route's, `route="(none)"`).
  http.use((req, res, next) => (req.path.startsWith('/docs/') ? serve(req, res, next) : next()));
}
