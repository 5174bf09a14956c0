import { Controller, Get, HttpCode, Inject, Put, Query, Req, Res } from '@nestjs/common';
import type { Request, Response } from 'express';
import { DomainError } from '../../domain/shared/domain-error';
import { keyProblem } from '../../domain/shared/storable-text';
import { isJsonObject } from '../../domain/terraform';
import { CONFIG, type Config } from '../config/config';
import { PostgresProviderSchemaCache } from '../provider/postgres-provider-schema-cache';
import { normaliseProviderSource } from '../provider/provider-address';
import { parseJson, readBody } from './read-body';

const VERSION = /^[0-9A-Za-z][0-9A-Za-z.+-]{0,99}$/;

/**
 * The shared provider schema cache. A plain cache, not events: a schema of a
 * released version never changes, and losing the table only costs GetSchema
 * calls.
 */
@Controller('v1/provider-schemas')
export class ProviderSchemasController {
  constructor(
    private readonly cache: PostgresProviderSchemaCache,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  @Get()
  async get(
    @Query('source') source: unknown,
    @Query('version') version: unknown,
    @Res() res: Response,
  ): Promise<void> {
    const key = keyOf(source, version);
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
  @HttpCode(200)
  async put(@Req() req: Request): Promise<{ source: string; version: string }> {
    const body = parseJson(
      await readBody(req, this.config.maxStateBytes, 'provider schema'),
      'REQUEST.INVALID',
      'request body',
    );
    if (!isJsonObject(body)) throw new DomainError('REQUEST.INVALID', 'body must be an object');
    const key = keyOf(body.source, body.version);
    const schema = body.schema;
    if (!isJsonObject(schema) || !isJsonObject(schema.provider)) {
      throw new DomainError('REQUEST.INVALID', 'schema must be a provider schema object');
    }
    await this.cache.putText(key.source, key.version, JSON.stringify(schema));
    return key;
  }
}

function keyOf(source: unknown, version: unknown): { source: string; version: string } {
  if (typeof source !== 'string' || source === '') {
    throw new DomainError('REQUEST.INVALID', 'source is required');
  }
  // The cache is keyed (and indexed) by source and version.
  const problem = keyProblem(source, 512);
  if (problem !== null) throw new DomainError('REQUEST.INVALID', `source ${problem}`);
  if (typeof version !== 'string' || !VERSION.test(version)) {
    throw new DomainError('REQUEST.INVALID', 'version must be an exact provider version');
  }
  return { source: normaliseProviderSource(source), version };
}
