import { Body, Controller, HttpCode, Post, Req } from '@nestjs/common';
import { DomainError } from '../../domain/shared/domain-error';
import { textProblem } from '../../domain/shared/storable-text';
import { QUERY_LIMITS } from '../query/query-limits';
import type { SqlQueryResult } from '../../domain/wire/query';
import { EVERYTHING, SqlQuery, SqlQueryService } from '../query/sql-query.service';
import { QueryDto } from './dto/query.dto';
import { JsonBody } from './json-body';
import { globToLike } from '../../domain/auth';
import { Access, principalOf } from './access';
import type { Request } from 'express';
import { Heavy } from './caller-bounds';

/** `POST /v1/query`: read-only SQL over the documented read models (docs/sql.md). */
@Controller('v1/query')
export class QueryController {
  constructor(private readonly queries: SqlQueryService) {}

  @Post()
  @Access.query()
  @Heavy('query')
  @HttpCode(200)
  @JsonBody({ what: 'query', limit: 1024 * 1024 })
  async query(@Body() body: QueryDto, @Req() req: Request): Promise<SqlQueryResult> {
    const grants = principalOf(req).grants;
    return this.queries.run(
      sqlQueryOf(body),
      grants.unrestricted
        ? EVERYTHING
        : { patterns: grants.globs('read').map(globToLike), allStreams: false },
    );
  }
}

function sqlQueryOf(body: QueryDto): SqlQuery {
  const params = body.params ?? [];
  params.forEach((p, i) => {
    // PostgreSQL takes neither in a text parameter.
    const problem = typeof p === 'string' ? textProblem(p) : null;
    if (problem !== null) throw new DomainError('REQUEST.INVALID', `params[${i}] ${problem}`);
  });
  return {
    sql: body.sql,
    // Objects and arrays go to PostgreSQL as JSON text (for json/jsonb parameters).
    params: params.map((p) => (typeof p === 'object' && p !== null ? JSON.stringify(p) : p)),
    maxRows: body.max_rows ?? QUERY_LIMITS.defaultMaxRows,
    timeoutMs: body.timeout_ms ?? QUERY_LIMITS.defaultTimeoutMs,
  };
}
