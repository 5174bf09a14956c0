import { Body, Controller, Get, HttpCode, Put, Query, Req, Res } from '@nestjs/common';
import type { Request, Response } from 'express';
import { DomainError } from '../../domain/shared/domain-error';
import { isJsonObject, JsonObject } from '../../domain/terraform';
import { PostgresProviderSchemaCache, TRUSTED } from '../provider/postgres-provider-schema-cache';
import { normaliseProviderSource } from '../provider/provider-address';
import { ProviderSchemaKeyDto, PutProviderSchemaDto } from './dto/provider-schema.dto';
import { JsonBody } from './json-body';
import { Access, principalOf } from './access';

/**
 * The shared provider schema cache. A plain cache, not events: a schema of a
 * released version never changes, and losing the table only costs GetSchema
 * calls. What an admin stores (and kld itself) serves everyone; what another
 * token stores serves that token alone, so a token with write on one state
 * cannot be the first to give every other state's refresh a wrong schema.
 */
@Controller('v1/provider-schemas')
export class ProviderSchemasController {
  constructor(private readonly cache: PostgresProviderSchemaCache) {}

  @Get()
  @Access.anyState('read')
  async get(
    @Query() query: ProviderSchemaKeyDto,
    @Req() req: Request,
    @Res() res: Response,
  ): Promise<void> {
    const key = keyOf(query);
    const text = await this.cache.getText(key.source, key.version, writerOf(req));
    if (text === null) {
      throw new DomainError(
        'PROVIDER_SCHEMA.NOT_FOUND',
        `no cached schema for ${key.source} ${key.version}`,
      );
    }
    // Served as stored: the AWS provider's schema is megabytes of JSON.
    res.status(200).type('application/json').send(`{"schema":${text}}`);
  }

  @Put()
  @Access.anyState('write')
  @HttpCode(200)
  @JsonBody({ what: 'provider schema', limit: 'maxStateBytes' })
  async put(
    @Body() body: PutProviderSchemaDto,
    @Req() req: Request,
  ): Promise<{ source: string; version: string }> {
    const key = keyOf(body);
    const problem = schemaShapeProblem(body.schema as unknown as JsonObject);
    if (problem !== null) {
      throw new DomainError('REQUEST.INVALID', `schema must be a provider schema: ${problem}`);
    }
    const writer = writerOf(req);
    const outcome = await this.cache.putText(
      key.source,
      key.version,
      JSON.stringify(body.schema),
      writer,
    );
    if (outcome === 'different') {
      throw new DomainError(
        'PROVIDER_SCHEMA.CONFLICT',
        `another schema for ${key.source} ${key.version} is cached already` +
          `${writer === TRUSTED ? '' : ` by token "${writer}"`} and is kept: a ` +
          'released provider version has one schema (an operator removes a wrong entry: ' +
          'docs/sql.md, provider_schemas)',
      );
    }
    return key;
  }
}

/**
 * What every reader of a cached schema relies on (kl decodes instances with
 * it): the provider block and the two maps of resource and data source
 * schemas, each a block of attribute and block lists.
 */
function schemaShapeProblem(schema: JsonObject): string | null {
  const isBlock = (v: unknown): boolean =>
    isJsonObject(v) &&
    isJsonObject(v.block) &&
    Array.isArray(v.block.attributes) &&
    Array.isArray(v.block.blockTypes);
  if (schema.protocolVersion !== 5 && schema.protocolVersion !== 6) {
    return 'protocolVersion must be 5 or 6';
  }
  if (!isBlock(schema.provider)) return 'provider must hold a block of attributes and blockTypes';
  for (const field of ['resourceSchemas', 'dataSourceSchemas'] as const) {
    const map = schema[field];
    if (!isJsonObject(map)) return `${field} must be an object`;
    for (const [name, entry] of Object.entries(map)) {
      if (!isBlock(entry)) return `${field}[${JSON.stringify(name)}] must hold a block`;
    }
  }
  return null;
}

/** Whose cache entries a request writes and reads besides the trusted ones. */
function writerOf(req: Request): string {
  const p = principalOf(req);
  return p.name === null || p.grants.has('admin') ? TRUSTED : p.name;
}

function keyOf(key: ProviderSchemaKeyDto): { source: string; version: string } {
  return { source: normaliseProviderSource(key.source), version: key.version };
}
