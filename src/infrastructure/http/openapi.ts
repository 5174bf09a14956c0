import type { INestApplication, Type } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import type { ExpressAdapter, NestExpressApplication } from '@nestjs/platform-express';
import {
  ApiBody,
  ApiOperation,
  ApiProperty,
  ApiQuery,
  ApiResponse,
  ApiTags,
  DocumentBuilder,
  OpenAPIObject,
  SwaggerModule,
} from '@nestjs/swagger';
import type {
  OperationObject,
  PathItemObject,
  SchemaObject,
} from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import { getMetadataStorage } from 'class-validator';
import { validationMetadatasToSchemas } from 'class-validator-jsonschema';
import { Router } from 'express';
import { packageVersion } from '../package-root';
import { ACCESS_RULE, AccessRule } from './access';
import { describedOperation, describedTags } from './api-description';

// Where @Type(() => Nested) is recorded: the type of a nested array's items.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { defaultMetadataStorage } = require('class-transformer/cjs/storage') as {
  defaultMetadataStorage: NonNullable<
    Parameters<typeof validationMetadatasToSchemas>[0]
  >['classTransformerMetadataStorage'];
};

/** Methods OpenAPI 3.0 has no field for, which terraform's backend uses. */
const CUSTOM_METHODS = ['lock', 'unlock'] as const;
/** Where a path item lists them, in the shape OpenAPI 3.2 gives `additionalOperations`. */
export const CUSTOM_METHODS_KEY = 'x-additional-operations';

const ERROR_SCHEMA: SchemaObject = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message'],
      properties: {
        code: {
          type: 'string',
          example: 'STATE.NOT_FOUND',
          description: 'docs/api.md lists every code',
        },
        message: { type: 'string' },
      },
    },
  },
};

/** Where each operation says who may call it (docs/security.md). */
export const ACCESS_KEY = 'x-kilolock-access';

/** Every controller class of the app, with its handlers by method name. */
function* controllers(app: INestApplication): Generator<[Type, Map<string, object>]> {
  const scanner = new MetadataScanner();
  for (const wrapper of app.get(DiscoveryService, { strict: false }).getControllers()) {
    const type = wrapper.metatype as Type | null;
    if (!type) continue;
    const handlers = new Map<string, object>();
    for (const method of scanner.getAllMethodNames(type.prototype)) {
      handlers.set(method, (type.prototype as Record<string, object>)[method]);
    }
    yield [type, handlers];
  }
}

/** The `@Access` rule of every controller method, by its operationId. */
function accessRules(app: INestApplication): Map<string, AccessRule> {
  const rules = new Map<string, AccessRule>();
  for (const [type, handlers] of controllers(app)) {
    for (const [method, handler] of handlers) {
      const rule = (Reflect.getMetadata(ACCESS_RULE, handler) ??
        Reflect.getMetadata(ACCESS_RULE, type)) as AccessRule | undefined;
      if (rule) rules.set(operationId(type.name, method), rule);
    }
  }
  return rules;
}

const describedControllers = new WeakSet<Type>();

/**
 * The `@Described` data of the controllers as @nestjs/swagger's own
 * decorators, applied once per class (the metadata lives on it) and in the
 * order TypeScript applies a stack of decorators, bottom up: the order of
 * query parameters and answers in the document is theirs.
 */
function describeOperations(app: INestApplication): void {
  for (const [type, handlers] of controllers(app)) {
    if (describedControllers.has(type)) continue;
    describedControllers.add(type);
    const tags = describedTags(type);
    if (tags) ApiTags(...tags)(type);
    for (const [method, handler] of handlers) {
      const described = describedOperation(handler);
      if (!described) continue;
      const { query = [], body, responses = [], ...operation } = described;
      const descriptor = Object.getOwnPropertyDescriptor(type.prototype, method)!;
      const apply = (decorator: MethodDecorator) => decorator(type.prototype, method, descriptor);
      for (const response of [...responses].reverse()) apply(ApiResponse(response));
      if (body) apply(ApiBody(body));
      for (const parameter of [...query].reverse()) apply(ApiQuery(parameter));
      apply(ApiOperation(operation));
    }
  }
}

const operationId = (controller: string, method: string) =>
  `${controller.replace(/Controller$/, '')}_${method}`;

/** What a rule asks of a token, in words, and which security schemes apply. */
function accessOf(rule: AccessRule): { text: string; security: Record<string, string[]>[] } {
  const token: Record<string, string[]>[] = [{ bearer: [] }, { basic: [] }];
  switch (rule.kind) {
    case 'public':
      return { text: 'public: no token needed', security: [] };
    case 'scope':
      return { text: `a token with the ${rule.scope} scope`, security: token };
    case 'state':
      return { text: `${rule.access} on the state the request names`, security: token };
    case 'anyState':
      return {
        text: `${rule.access} on some state; the answer holds only the states the token may ${rule.access}, or is refused for one it may not`,
        security: token,
      };
  }
}

/**
 * What `GET /v1/events`'s query parameters mean. Their names, types and
 * limits come from EventsQueryDto like every other query's; the DTO's
 * validation rules do not say what a parameter is for.
 */
const EVENTS_PARAMETER_TEXT: Record<string, string> = {
  from: 'a position to resume after (or `start`, `end`); `Last-Event-ID` works too',
  follow: '`true` (default): stay open and follow the log; `false`: end at its head (`1`/`0` too)',
  state: 'state names or globs (repeated or comma-separated)',
  stream: 'stream id prefixes (repeated or comma-separated)',
  type: 'event types (repeated or comma-separated)',
  limit: 'at most this many events',
  checkpoint_ms: 'a filtered feed sends a checkpoint at most this often',
  heartbeat: 'seconds between keep-alive comments',
};

let described = false;

/**
 * The request DTOs' properties as @nestjs/swagger sees them, derived from
 * their class-validator rules (class-validator-jsonschema turns each class's
 * rules into a JSON schema): one source for what is checked and what is
 * documented, and @nestjs/swagger then builds bodies and query parameters
 * the usual way. Once per process: the metadata lives on the classes.
 */
function describeDtos(): void {
  if (described) return;
  described = true;
  const schemas = validationMetadatasToSchemas({
    refPointerPrefix: '#/components/schemas/',
    classTransformerMetadataStorage: defaultMetadataStorage,
  });
  const targets = new Map<string, Type>();
  const storage = getMetadataStorage() as unknown as {
    validationMetadatas: Map<Type, unknown[]>;
  };
  for (const target of storage.validationMetadatas.keys()) targets.set(target.name, target);
  for (const [name, schema] of Object.entries(schemas)) {
    const target = targets.get(name);
    if (!target) continue;
    const required = new Set((schema as SchemaObject).required ?? []);
    for (const [prop, raw] of Object.entries((schema as SchemaObject).properties ?? {})) {
      ApiProperty({
        ...propertyOptions(raw as SchemaObject, targets),
        required: required.has(prop),
      })(target.prototype, prop);
    }
  }
}

/** A property's JSON schema as ApiProperty options; a nested DTO by its class. */
function propertyOptions(
  schema: SchemaObject,
  targets: Map<string, Type>,
): Record<string, unknown> {
  const refName = (ref: unknown) => (typeof ref === 'string' ? ref.split('/').pop()! : null);
  const ref = refName((schema as { $ref?: string }).$ref);
  if (ref && targets.has(ref)) return { type: () => targets.get(ref) };
  const items = schema.items as { $ref?: string } | undefined;
  const itemRef = refName(items?.$ref);
  if (schema.type === 'array' && itemRef && targets.has(itemRef)) {
    const { items: _items, type: _type, ...rest } = schema;
    return { ...rest, type: () => targets.get(itemRef), isArray: true };
  }
  // A member taken as any JSON value (@Verbatim) has no type rule.
  if (schema.type === undefined && !schema.enum)
    return { ...schema, type: 'object', additionalProperties: true };
  return { ...schema };
}

/**
 * The OpenAPI document of every route kld serves, generated from the
 * controllers and the DTOs. Terraform's LOCK and UNLOCK have no place in
 * OpenAPI 3.0's path items: they are listed under `x-additional-operations`
 * of their path (the shape of 3.2's `additionalOperations`), next to their
 * POST aliases, which are ordinary operations.
 */
export function openApiDocument(app: INestApplication): OpenAPIObject {
  describeDtos();
  describeOperations(app);
  const config = new DocumentBuilder()
    .setTitle('Kilolock')
    .setVersion(packageVersion())
    .setDescription(
      'Terraform/OpenTofu http backend and the REST API of kld. Refusals are ' +
        '`{"error":{"code","message"}}` (docs/api.md). State names are paths ' +
        '(`team/prod/network`): their slashes are part of the URL path, never encoded. ' +
        'With authentication on, each operation says what its token needs under ' +
        `\`${ACCESS_KEY}\` (docs/security.md).`,
    )
    .addBearerAuth({ type: 'http', scheme: 'bearer', description: 'a kld token (kl_…)' }, 'bearer')
    .addBasicAuth(
      {
        type: 'http',
        scheme: 'basic',
        description:
          "the token as the password (terraform's http backend); the username is recorded",
      },
      'basic',
    )
    .build();
  const rules = accessRules(app);
  const document = SwaggerModule.createDocument(app, config, {
    operationIdFactory: operationId,
  });
  document.components ??= {};
  document.components.schemas = { ...document.components.schemas, Error: ERROR_SCHEMA };
  for (const [route, item] of Object.entries(document.paths)) {
    const custom: Record<string, OperationObject> = {};
    const pathItem = item as PathItemObject & Record<string, OperationObject | undefined>;
    for (const method of CUSTOM_METHODS) {
      const op = pathItem[method];
      if (!op) continue;
      custom[method.toUpperCase()] = op;
      delete pathItem[method];
    }
    if (Object.keys(custom).length > 0) {
      (pathItem as Record<string, unknown>)[CUSTOM_METHODS_KEY] = custom;
    }
    const operations = [
      ...Object.values(custom),
      ...(['get', 'put', 'post', 'delete', 'patch'] as const)
        .map((m) => pathItem[m])
        .filter((op): op is OperationObject => op !== undefined),
    ];
    for (const op of operations) {
      const rule = op.operationId ? rules.get(op.operationId) : undefined;
      if (rule) {
        const access = accessOf(rule);
        op.security = access.security;
        (op as unknown as Record<string, unknown>)[ACCESS_KEY] = access.text;
      }
      if (route === '/v1/events' && op === pathItem.get) {
        for (const p of op.parameters ?? []) {
          if ('in' in p && p.in === 'query') p.description ??= EVENTS_PARAMETER_TEXT[p.name];
        }
        op.responses = {
          ...op.responses,
          '200': {
            description:
              'Server-Sent Events: each event, caught-up and checkpoint (docs/events.md)',
            content: { 'text/event-stream': { schema: { type: 'string' } } },
          },
        };
      }
      op.responses ??= {};
      op.responses.default ??= {
        description: 'A refusal: the code says which (docs/api.md)',
        content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
      };
      for (const p of op.parameters ?? []) {
        if ('in' in p && p.in === 'path' && route.includes(`{${p.name}}`) && isWildcard(p.name)) {
          p.description ??=
            'a state name: segments of letters, digits and `. _ @ + = -` joined by literal slashes';
        }
      }
    }
  }
  return document;
}

// The routes' wildcard parameters (`*name`, `*path`) hold a state name with its slashes.
const isWildcard = (name: string) => name === 'name' || name === 'path';

/**
 * `/openapi.json` and the Swagger UI at `/docs`, its scripts and styles
 * served from the swagger-ui-dist package (no CDN), as routes of a router of
 * their own: SwaggerModule.setup registers them through the app it is given
 * (its HTTP adapter's routes, its static assets), and this one is the app
 * with its adapter's Express instance swapped for the router. The document
 * is built by the first request that needs it (it walks every controller
 * and DTO).
 */
export function openApiRouter(app: NestExpressApplication): Router {
  const router = Router();
  const adapter = Object.create(app.getHttpAdapter(), {
    instance: { value: router },
  }) as ExpressAdapter;
  // Own properties: Nest's app is a proxy that binds its methods to itself.
  const onRouter = Object.create(app, {
    getHttpAdapter: { value: () => adapter },
    useStaticAssets: {
      value: (...args: Parameters<ExpressAdapter['useStaticAssets']>) =>
        adapter.useStaticAssets(...args),
    },
  }) as NestExpressApplication;
  SwaggerModule.setup('docs', onRouter, () => openApiDocument(app), {
    jsonDocumentUrl: 'openapi.json',
    raw: ['json'],
    customSiteTitle: 'Kilolock API',
  });
  return router;
}
