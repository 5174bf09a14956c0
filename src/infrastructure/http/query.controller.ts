import { Controller, HttpCode, Post, Req } from '@nestjs/common';
import type { Request } from 'express';
import { DomainError } from '../../domain/shared/domain-error';
import { textProblem } from '../../domain/shared/storable-text';
import { QUERY_LIMITS } from '../query/query-limits';
import { SqlQuery, SqlQueryResult, SqlQueryService } from '../query/sql-query.service';
import { parseJson, readBody } from './read-body';

const MAX_BODY_BYTES = 1024 * 1024;
/** `POST /v1/query`: read-only SQL over the documented read models (docs/sql.md). */
@Controller('v1/query')
export class QueryController {
  constructor(private readonly queries: SqlQueryService) {}

  @Post()
  @HttpCode(200)
  async query(@Req() req: Request): Promise<SqlQueryResult> {
    const body = parseJson(
      await readBody(req, MAX_BODY_BYTES, 'query'),
      'REQUEST.INVALID',
      'query',
    );
    return this.queries.run(parseQuery(body));
  }
}

export function parseQuery(body: unknown): SqlQuery {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw invalid('body must be a JSON object {sql, params?, max_rows?, timeout_ms?}');
  }
  const b = body as Record<string, unknown>;
  const unknownKeys = Object.keys(b).filter(
    (k) => !['sql', 'params', 'max_rows', 'timeout_ms'].includes(k),
  );
  if (unknownKeys.length) throw invalid(`unknown field(s): ${unknownKeys.join(', ')}`);
  if (typeof b.sql !== 'string' || b.sql.trim() === '')
    throw invalid('sql must be a non-empty string');
  // PostgreSQL takes neither in query text or text parameters.
  const sqlProblem = textProblem(b.sql);
  if (sqlProblem !== null) throw invalid(`sql ${sqlProblem}`);
  if (b.params !== undefined && !Array.isArray(b.params)) throw invalid('params must be an array');
  const params = (b.params as unknown[] | undefined) ?? [];
  if (params.length > QUERY_LIMITS.maxParams) {
    throw invalid(`at most ${QUERY_LIMITS.maxParams} params are allowed`);
  }
  params.forEach((p, i) => {
    const problem = typeof p === 'string' ? textProblem(p) : null;
    if (problem !== null) throw invalid(`params[${i}] ${problem}`);
  });
  return {
    sql: b.sql,
    // Objects and arrays go to PostgreSQL as JSON text (for json/jsonb parameters).
    params: params.map((p) => (typeof p === 'object' && p !== null ? JSON.stringify(p) : p)),
    maxRows: integerIn(
      b.max_rows,
      'max_rows',
      1,
      QUERY_LIMITS.maxMaxRows,
      QUERY_LIMITS.defaultMaxRows,
    ),
    timeoutMs: integerIn(
      b.timeout_ms,
      'timeout_ms',
      1,
      QUERY_LIMITS.maxTimeoutMs,
      QUERY_LIMITS.defaultTimeoutMs,
    ),
  };
}

function integerIn(
  value: unknown,
  name: string,
  min: number,
  max: number,
  fallback: number,
): number {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw invalid(`${name} must be an integer from ${min} to ${max}`);
  }
  return value;
}

function invalid(message: string): DomainError {
  return new DomainError('REQUEST.INVALID', message);
}
