import { Body, Controller, Get, HttpCode, Put, Query, Res } from '@nestjs/common';
import type { Response } from 'express';
import { DomainError } from '../../domain/shared/domain-error';
import { isJsonObject, JsonObject } from '../../domain/terraform';
import { PostgresProviderSchemaCache } from '../provider/postgres-provider-schema-cache';
import { normaliseProviderSource } from '../provider/provider-address';
import { ProviderSchemaKeyDto, PutProviderSchemaDto } from './dto/provider-schema.dto';
import { JsonBody } from './json-body';
import { Access } from './access';

/**
 * The shared provider schema cache. A plain cache, not events: a schema of a
 * released version never changes, and losing the table only costs GetSchema
 * calls.
 */
@Controller('v1/provider-schemas')
export class ProviderSchemasController {
  constructor(private readonly cache: PostgresProviderSchemaCache) {}

  @Get()
  @Access.anyState('read')
  async get(@Query() query: ProviderSchemaKeyDto, @Res() res: Response): Promise<void> {
    const key = keyOf(query);
    const text = await this.cache.getText(key.source, key.version);
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
  async put(@Body() body: PutProviderSchemaDto): Promise<{ source: string; version: string }> {
    const key = keyOf(body);
    const problem = schemaShapeProblem(body.schema as unknown as JsonObject);
    if (problem !== null) {
      throw new DomainError('REQUEST.INVALID', `schema must be a provider schema: ${problem}`);
    }
    const outcome = await this.cache.putText(key.source, key.version, JSON.stringify(body.schema));
    if (outcome === 'different') {
      throw new DomainError(
        'PROVIDER_SCHEMA.CONFLICT',
        `another schema for ${key.source} ${key.version} is cached already and is kept: a ` +
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

function keyOf(key: ProviderSchemaKeyDto): { source: string; version: string } {
  return { source: normaliseProviderSource(key.source), version: key.version };
}
