import type { NestExpressApplication } from '@nestjs/platform-express';
import express, { Router } from 'express';
import { Writable } from 'node:stream';
import request from 'supertest';
import { createLogger } from '../logging/logger';
import { ErrorFilter } from './error.filter';
import { OpenApiLoader, serveOpenApi } from './openapi-routes';

/**
 * The routes on an Express app as kld builds it, with a stand-in for the
 * document builder's router; what the filter logged is kept.
 */
function appWith(load: OpenApiLoader) {
  const logged: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      logged.push(JSON.parse(chunk.toString('utf8')) as Record<string, unknown>);
      done();
    },
  });
  const http = express();
  const app = { getHttpAdapter: () => ({ getInstance: () => http }) };
  serveOpenApi(
    app as unknown as NestExpressApplication,
    new ErrorFilter(createLogger('info', 'json', sink)),
    load,
  );
  // What Nest puts after them: its routes, then its 404.
  http.get('/v1/other', (_req, res) => res.status(204).end());
  http.use((_req, res) => res.status(404).json({ error: { code: 'REQUEST.NOT_FOUND' } }));
  return { http, logged };
}

function documentRouter(): Router {
  const router = Router();
  router.get('/openapi.json', (_req, res) => res.json({ openapi: '3.0.0' }));
  router.get('/docs/boom', () => {
    throw new Error('secret detail at /srv/kilolock/dist/openapi.js:12');
  });
  return router;
}

const SERVER_ERROR = {
  error: { code: 'SERVER.ERROR', message: expect.stringMatching(/^internal error \(request id/) },
};

describe('the API document routes', () => {
  it('answers a failed load as a server error without its stack, and loads again on the next request', async () => {
    let loads = 0;
    const { http, logged } = appWith(() => {
      loads++;
      return loads === 1
        ? Promise.reject(new Error('Cannot find module ./openapi at /srv/kilolock/dist'))
        : Promise.resolve(documentRouter());
    });
    const failed = await request(http).get('/openapi.json');
    expect([failed.status, failed.type, failed.body]).toEqual([
      500,
      'application/json',
      SERVER_ERROR,
    ]);
    expect(failed.text).not.toContain('/srv/kilolock');
    expect(logged.map((l) => (l.err as { message?: string } | undefined)?.message)).toEqual([
      'Cannot find module ./openapi at /srv/kilolock/dist',
    ]);

    const served = await request(http).get('/openapi.json');
    expect([served.status, served.body, loads]).toEqual([200, { openapi: '3.0.0' }, 2]);
    await request(http).get('/openapi.json');
    expect(loads).toBe(2);
  });

  it('answers a route of the document that fails as a server error without its stack', async () => {
    const { http } = appWith(() => Promise.resolve(documentRouter()));
    const failed = await request(http).get('/docs/boom');
    expect([failed.status, failed.type, failed.body]).toEqual([
      500,
      'application/json',
      SERVER_ERROR,
    ]);
    expect(failed.text).not.toContain('/srv/kilolock');
  });

  it('leaves every other request, and what the document does not serve, to the routes after it', async () => {
    let loads = 0;
    const { http } = appWith(() => {
      loads++;
      return Promise.resolve(documentRouter());
    });
    expect((await request(http).get('/v1/other')).status).toBe(204);
    expect(loads).toBe(0);
    const missing = await request(http).get('/docs/no-such-file.js');
    expect([missing.status, missing.body]).toEqual([404, { error: { code: 'REQUEST.NOT_FOUND' } }]);
  });
});
