import type { INestApplication, Type } from '@nestjs/common';
import { ApiProperty, DocumentBuilder, OpenAPIObject, SwaggerModule } from '@nestjs/swagger';
import type {
  OperationObject,
  PathItemObject,
  SchemaObject,
} from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import { getMetadataStorage } from 'class-validator';
import { validationMetadatasToSchemas } from 'class-validator-jsonschema';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { packageRoot } from '../package-root';

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
  const { version } = JSON.parse(
    fs.readFileSync(path.join(packageRoot(), 'package.json'), 'utf8'),
  ) as { version: string };
  const config = new DocumentBuilder()
    .setTitle('Kilolock')
    .setVersion(version)
    .setDescription(
      'Terraform/OpenTofu http backend and the REST API of kld. Refusals are ' +
        '`{"error":{"code","message"}}` (docs/api.md). State names are paths ' +
        '(`team/prod/network`): their slashes are part of the URL path, never encoded.',
    )
    .build();
  const document = SwaggerModule.createDocument(app, config, {
    operationIdFactory: (controller, method) =>
      `${controller.replace(/Controller$/, '')}_${method}`,
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
 * served from the swagger-ui-dist package (no CDN).
 */
export function serveOpenApi(app: INestApplication): OpenAPIObject {
  const document = openApiDocument(app);
  SwaggerModule.setup('docs', app, document, {
    jsonDocumentUrl: 'openapi.json',
    raw: ['json'],
    customSiteTitle: 'Kilolock API',
  });
  return document;
}
