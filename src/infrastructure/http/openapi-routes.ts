import type { NestExpressApplication } from '@nestjs/platform-express';
import type { Express, NextFunction, Request, RequestHandler, Response, Router } from 'express';
import type { ErrorFilter } from './error.filter';

/** Builds the router of `/openapi.json` and `/docs` (openapi.ts, which loads @nestjs/swagger). */
export type OpenApiLoader = (app: NestExpressApplication) => Promise<Router>;

const loadOpenApi: OpenApiLoader = (app) =>
  import('./openapi').then(({ openApiRouter }) => openApiRouter(app));

/**
 * `/openapi.json` and `/docs` (the Swagger UI and its files), routed at
 * start but built by the first request for one of them: the document
 * builder and @nestjs/swagger (about a fifth of the packages kld loads, for
 * pages few callers ask for) are loaded then, not by every start of kld.
 * The routes are registered now, ahead of Nest's routes and its 404 (added
 * when the app listens): one added on the first request would never be reached.
 *
 * They are Express's, not Nest's, so their failures are handed to `errors`
 * here: Express's own last handler would answer with the stack trace. A
 * load that failed is forgotten, so the next request tries again.
 */
export function serveOpenApi(
  app: NestExpressApplication,
  errors: ErrorFilter,
  load: OpenApiLoader = loadOpenApi,
): void {
  let router: Promise<Router> | null = null;
  const serve: RequestHandler = (req, res, next) => {
    const fail = (err: unknown) => errors.reply(err, req, res);
    const loading = (router ??= load(app));
    loading.then(
      (r) => r(req, res, (err?: unknown) => (err ? fail(err) : next())),
      (err: unknown) => {
        if (router === loading) router = null;
        fail(err);
      },
    );
  };
  const http = app.getHttpAdapter().getInstance() as Express;
  http.get('/openapi.json', serve);
  http.get('/docs', serve);
  // The UI's files are no route of ours: a middleware, as the static files it hands them to
  // (metrics count a missing one as no route's, `route="(none)"`).
  http.use((req: Request, res: Response, next: NextFunction) =>
    req.path.startsWith('/docs/') ? serve(req, res, next) : next(),
  );
}
