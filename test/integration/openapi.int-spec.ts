import * as fs from 'node:fs';
import * as path from 'node:path';
import request from 'supertest';
import { startServer, KldServer } from '../../src/app/server';
import { loadConfig } from '../../src/infrastructure/config/config';
import { STATE_SORTS } from '../../src/domain/wire/dashboard';
import { ACCESS_KEY, CUSTOM_METHODS_KEY } from '../../src/infrastructure/http/openapi';
import { createTestDatabase, quietLogger, TestDatabase } from '../support/test-database';

type Doc = {
  openapi: string;
  paths: Record<string, Record<string, unknown>>;
  components: {
    schemas: Record<string, { properties?: Record<string, unknown>; required?: string[] }>;
  };
};
type Parameter = {
  name: string;
  in: string;
  required?: boolean;
  description?: string;
  schema?: { enum?: unknown[]; minimum?: number; maximum?: number };
};
type Operation = {
  security?: Record<string, string[]>[];
  [ACCESS_KEY]?: string;
  requestBody?: {
    content: Record<string, { schema: { $ref?: string } & Record<string, unknown> }>;
  };
  parameters?: Parameter[];
  responses: Record<string, unknown>;
};

/** Express routes of the running app: what kld really answers. */
function servedRoutes(server: KldServer): { method: string; path: string }[] {
  const router = (
    server.app.getHttpAdapter().getInstance() as {
      router: { stack: { route?: { path: string; methods: Record<string, boolean> } }[] };
    }
  ).router;
  return router.stack.flatMap((layer) =>
    layer.route
      ? Object.keys(layer.route.methods).map((method) => ({ method, path: layer.route!.path }))
      : [],
  );
}

/** `/v1/states/*name` is `/v1/states/{name}` in OpenAPI, `:runId` is `{runId}`. */
const openApiPath = (route: string) => route.replace(/[:*](\w+)/g, '{$1}');

/** The served routes the document lacks, as `METHOD path`. */
function missingRoutes(routes: { method: string; path: string }[], doc: Doc): string[] {
  return routes
    .filter((r) => r.path !== '/openapi.json' && r.path !== '/docs' && !r.path.startsWith('/docs/'))
    .filter((r) => {
      const item = doc.paths[openApiPath(r.path)];
      const custom = (item?.[CUSTOM_METHODS_KEY] ?? {}) as Record<string, unknown>;
      return !item?.[r.method] && !custom[r.method.toUpperCase()];
    })
    .map((r) => `${r.method.toUpperCase()} ${r.path}`);
}

/**
 * The routes docs/api.md lists, as `METHOD /path/{}`: the `METHOD /path` of
 * each table row's first cell (a method alone, as in "`GET`, `PUT`,
 * `DELETE /v1/x`", shares the next path), without its query and optional parts.
 */
function documentedRoutes(apiMd: string): string[] {
  const routes = new Set<string>();
  for (const row of apiMd.split('\n').filter((line) => line.startsWith('| `'))) {
    const firstCell = row.slice(1).split(/(?<!\\)\|/)[0];
    let pending: string[] = [];
    for (const [, span] of firstCell.matchAll(/`([^`]+)`/g)) {
      const m = /^(?:([A-Z]+) )?(\/[^?[\s]*)/.exec(span) ?? /^([A-Z]+)$/.exec(span);
      if (!m) continue;
      if (m[2] === undefined) {
        pending.push(m[1]);
        continue;
      }
      const methods = [...pending, ...(m[1] ? [m[1]] : pending.length === 0 ? ['GET'] : [])];
      for (const method of methods) routes.add(`${method} ${m[2].replace(/<[^>]+>/g, '{}')}`);
      pending = [];
    }
  }
  return [...routes].sort();
}

/** A served route as documentedRoutes writes it. */
const documentedForm = (r: { method: string; path: string }) =>
  `${r.method.toUpperCase()} ${r.path.replace(/[:*]\w+/g, '{}')}`;

/** `/openapi.json` and `/docs`, generated from the controllers and the DTOs. */
describe('the OpenAPI document', () => {
  let t: TestDatabase;
  let server: KldServer;
  let doc: Doc;
  const http = () => request(server.app.getHttpServer());
  beforeAll(async () => {
    t = await createTestDatabase();
    server = await startServer(
      loadConfig({ KL_DATABASE_URL: t.url, KL_LISTEN: '127.0.0.1:0', KL_GRPC_LISTEN: 'off' }),
      quietLogger,
    );
    doc = (await http().get('/openapi.json').expect(200)).body as Doc;
  });
  afterAll(async () => {
    await server.close();
    await t.drop();
  });

  it('lists every route kld serves, and this check notices one left out', () => {
    const routes = servedRoutes(server);
    expect(routes.length).toBeGreaterThan(25);
    expect(missingRoutes(routes, doc)).toEqual([]);

    const without = structuredClone(doc);
    delete without.paths['/v1/refresh-runs/{runId}/finish'];
    delete (without.paths['/v1/states/{name}'][CUSTOM_METHODS_KEY] as Record<string, unknown>)
      .UNLOCK;
    expect(missingRoutes(routes, without)).toEqual([
      'UNLOCK /v1/states/*name',
      'POST /v1/refresh-runs/:runId/finish',
    ]);
  });

  it('is the list docs/api.md gives: every route kld serves, and no other', () => {
    const apiMd = fs.readFileSync(path.join(__dirname, '../../docs/api.md'), 'utf8');
    // The Swagger UI's own files under /docs/ are its page's, not routes of ours.
    const served = [
      ...new Set(
        servedRoutes(server)
          .filter((r) => !r.path.startsWith('/docs/'))
          .map(documentedForm),
      ),
    ].sort();
    // The dashboard's files (`/ui/app.js`, …) are one route.
    const documented = [
      ...new Set(
        documentedRoutes(apiMd).map((r) => r.replace(/^GET \/ui\/[\w.-]+$/, 'GET /ui/{}')),
      ),
    ];
    expect(documented.length).toBeGreaterThan(60);
    expect({
      undocumented: served.filter((r) => !documented.includes(r)),
      notServed: documented.filter((r) => !served.includes(r)),
    }).toEqual({ undocumented: [], notServed: [] });
  });

  it('has the routes of every slice: tokens, events, archives, apply runs, state engine, dashboard', () => {
    const paths = Object.keys(doc.paths);
    for (const route of [
      '/v1/admin/tokens',
      '/v1/admin/tokens/{name}',
      '/v1/events',
      '/v1/archives',
      '/v1/api/states/{name}/apply-runs',
      '/v1/api/reservations',
      '/v1/engine/states/{name}/scope',
      '/metrics',
    ]) {
      expect(paths).toContain(route);
    }
    expect(paths.filter((p) => p.startsWith('/v1/dashboard/')).length).toBeGreaterThan(3);
    const token = (doc.paths['/v1/admin/tokens'].post as Operation).requestBody!.content[
      'application/json'
    ].schema.$ref!;
    expect(doc.components.schemas[token.split('/').pop()!].required).toEqual(
      expect.arrayContaining(['name', 'scopes']),
    );
    const events = doc.paths['/v1/events'].get as Operation;
    expect(events.parameters!.map((p) => p.name).sort()).toEqual(
      ['checkpoint_ms', 'follow', 'from', 'heartbeat', 'limit', 'state', 'stream', 'type'].sort(),
    );
    const states = doc.paths['/v1/dashboard/states'].get as Operation;
    const params = Object.fromEntries(states.parameters!.map((p) => [p.name, p]));
    expect(Object.keys(params).sort()).toEqual(['glob', 'limit', 'offset', 'order', 'sort']);
    expect(Object.values(params).every((p) => !p.required)).toBe(true);
    expect(params.sort.schema!.enum).toEqual(STATE_SORTS);
    expect(params.limit.schema).toMatchObject({ minimum: 1, maximum: 500 });
    expect(params.glob.description).toMatch(/glob/);
    // Described from EventsQueryDto: its types and limits, and what each is for.
    const param = (name: string) => events.parameters!.find((p) => p.name === name)!;
    expect(param('limit')).toMatchObject({
      in: 'query',
      required: false,
      schema: { type: 'integer', minimum: 1, maximum: 1_000_000_000 },
    });
    expect(param('state')).toMatchObject({ schema: { type: 'array', items: { type: 'string' } } });
    expect(param('follow')).toMatchObject({ schema: { type: 'boolean' } });
    for (const p of events.parameters!) expect(p.description).toEqual(expect.any(String));
  });

  it('says what each operation needs of a token, from its @Access rule', () => {
    const op = (route: string, method: string) => doc.paths[route][method] as Operation;
    expect(op('/healthz', 'get')).toMatchObject({ security: [], [ACCESS_KEY]: expect.any(String) });
    expect(op('/metrics', 'get')[ACCESS_KEY]).toBe('a token with the metrics scope');
    expect(op('/v1/admin/tokens', 'post')[ACCESS_KEY]).toBe('a token with the admin scope');
    expect(op('/v1/states/{name}', 'post')).toMatchObject({
      security: [{ bearer: [] }, { basic: [] }],
      [ACCESS_KEY]: 'write on the state the request names',
    });
    expect(op('/v1/api/states', 'get')[ACCESS_KEY]).toMatch(/^read on some state/);
    const custom = doc.paths['/v1/states/{name}'][CUSTOM_METHODS_KEY] as Record<string, Operation>;
    expect(custom.LOCK[ACCESS_KEY]).toBe('write on the state the request names');
    // every operation says it
    for (const pathItem of Object.values(doc.paths)) {
      for (const [method, o] of Object.entries(pathItem)) {
        if (method.startsWith('x-')) continue;
        expect([method, (o as Operation)[ACCESS_KEY]]).toEqual([method, expect.any(String)]);
      }
    }
  });

  it('describes terraform’s LOCK and UNLOCK beside the path’s ordinary methods', () => {
    const item = doc.paths['/v1/states/{name}'];
    expect(Object.keys(item).sort()).toEqual(['delete', 'get', 'post', CUSTOM_METHODS_KEY].sort());
    const custom = item[CUSTOM_METHODS_KEY] as Record<string, Operation>;
    expect(Object.keys(custom).sort()).toEqual(['LOCK', 'UNLOCK']);
    const lockBody = custom.LOCK.requestBody!.content['application/json'].schema;
    expect(lockBody).toMatchObject({ required: ['ID'], properties: { ID: { type: 'string' } } });
    expect(Object.keys(custom.LOCK.responses)).toEqual(expect.arrayContaining(['200', '423']));
    expect(Object.keys(custom.UNLOCK.responses)).toEqual(expect.arrayContaining(['200', '409']));
    // the aliases for proxies that drop custom methods are ordinary POSTs
    expect(doc.paths['/v1/state-lock/{name}'].post).toBeDefined();
    // no path item holds a field OpenAPI 3.0 does not define
    const fields = new Set(['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']);
    for (const [route, pathItem] of Object.entries(doc.paths)) {
      for (const key of Object.keys(pathItem)) {
        expect([route, fields.has(key) || key.startsWith('x-')]).toEqual([route, true]);
      }
    }
    expect(doc.openapi).toMatch(/^3\.0\./);
  });

  it('takes bodies and query parameters from the class-validator DTOs', () => {
    const query = doc.paths['/v1/query'].post as Operation;
    const ref = query.requestBody!.content['application/json'].schema.$ref!;
    const schema = doc.components.schemas[ref.split('/').pop()!];
    expect(schema.required).toEqual(['sql']);
    expect(schema.properties).toMatchObject({
      sql: { type: 'string' },
      max_rows: { type: 'integer', minimum: 1 },
    });
    const drift = doc.paths['/v1/drift'].get as Operation;
    expect(drift.parameters).toContainEqual(
      expect.objectContaining({ name: 'state', in: 'query', required: true }),
    );
    // a nested DTO: the results of a refresh run
    const results = doc.paths['/v1/refresh-runs/{runId}/results'].post as Operation;
    const resultsRef = results.requestBody!.content['application/json'].schema.$ref!;
    const resultsSchema = doc.components.schemas[resultsRef.split('/').pop()!];
    expect(JSON.stringify(resultsSchema.properties)).toContain('RefreshResultDto');
    expect(doc.components.schemas.RefreshResultDto.properties).toHaveProperty('outcome');
  });

  it('gives every operation the error answer', () => {
    for (const pathItem of Object.values(doc.paths)) {
      const ops = [
        ...Object.entries(pathItem)
          .filter(([k]) => !k.startsWith('x-'))
          .map(([, v]) => v),
        ...Object.values((pathItem[CUSTOM_METHODS_KEY] ?? {}) as Record<string, unknown>),
      ] as Operation[];
      for (const op of ops) {
        expect(op.responses.default).toMatchObject({
          content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
        });
      }
    }
  });

  it('serves the Swagger UI at /docs from its own files, no CDN', async () => {
    const page = await http().get('/docs').expect(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    const assets = [...page.text.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
    expect(assets.length).toBeGreaterThanOrEqual(3);
    for (const asset of assets) {
      expect(asset).not.toMatch(/^(https?:)?\/\//);
      const url = new URL(asset, 'http://kld.test/docs').pathname;
      const r = await http().get(url);
      expect([url, r.status]).toEqual([url, 200]);
    }
    const init = await http().get('/docs/swagger-ui-init.js').expect(200);
    expect(init.text).toContain('"Kilolock"');
  });
});
