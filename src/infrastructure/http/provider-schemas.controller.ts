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
    if (!isJsonObject((body.schema as unknown as JsonObject).provider)) {
      throw new DomainError('REQUEST.INVALID', 'schema must be a provider schema object');
    }
    await this.cache.putText(key.source, key.version, JSON.stringify(body.schema));
    return key;
  }
}

function keyOf(key: ProviderSchemaKeyDto): { source: string; version: string } {
  return { source: normaliseProviderSource(key.source), version: key.version };
}
