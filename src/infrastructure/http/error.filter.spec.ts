import type { ArgumentsHost } from '@nestjs/common';
import { NotFoundException } from '@nestjs/common';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Writable } from 'node:stream';
import { DomainError } from '../../domain/shared/domain-error';
import { ERROR_CODES, ErrorCode } from '../../domain/shared/error-codes';
import { createLogger } from '../logging/logger';
import { packageRoot } from '../package-root';
import { ErrorFilter, withDetails } from './error.filter';
import { HTTP_STATUS_BY_CODE, statusFor } from './error-status';

interface Answer {
  status: number;
  body: { error: { code: string; message: string } };
  headers: Record<string, string>;
}

/** Runs the filter on `err` as if thrown by a route; returns the answer and the log lines. */
function answerTo(
  err: unknown,
  headersSent = false,
): { answer: Answer; logged: Record<string, unknown>[] } {
  const logged: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      logged.push(JSON.parse(chunk.toString('utf8')) as Record<string, unknown>);
      done();
    },
  });
  const answer = { headers: {} } as Answer;
  const res = {
    headersSent,
    setHeader: (name: string, value: string) => (answer.headers[name] = value),
    getHeader: (name: string) => answer.headers[name],
    status(code: number) {
      answer.status = code;
      return this;
    },
    json(body: Answer['body']) {
      answer.body = body;
      return this;
    },
    send(text: string) {
      answer.body = JSON.parse(text) as Answer['body'];
      return this;
    },
  };
  const req = { id: 'req-42' };
  const host = {
    switchToHttp: () => ({ getResponse: () => res, getRequest: () => req }),
  } as unknown as ArgumentsHost;
  new ErrorFilter(createLogger('info', 'json', sink)).catch(err, host);
  return { answer, logged };
}

describe('error codes and their HTTP statuses', () => {
  it('gives every code a status (or none, for kld and kl exits) and knows no other code', () => {
    expect(Object.keys(HTTP_STATUS_BY_CODE).sort()).toEqual([...ERROR_CODES].sort());
    expect(new Set(ERROR_CODES).size).toBe(ERROR_CODES.length);
  });

  it('is documented in docs/api.md, code by code, with the same status', () => {
    const doc = fs.readFileSync(path.join(packageRoot(), 'docs', 'api.md'), 'utf8');
    const table = doc.slice(doc.indexOf('## Error codes'));
    const rows = [...table.matchAll(/^\| `([A-Z_]+\.[A-Z_]+)` \| (\d{3}|—) \|/gm)].map((m) => [
      m[1],
      m[2] === '—' ? null : Number(m[2]),
    ]);
    expect(Object.fromEntries(rows)).toEqual(HTTP_STATUS_BY_CODE);
    expect(rows).toHaveLength(ERROR_CODES.length);
  });

  it('has no status for a code it does not know', () => {
    expect(statusFor('STATE.NO_SUCH_THING')).toBeNull();
    expect(statusFor('toString')).toBeNull();
  });
});

describe('ErrorFilter', () => {
  it('answers a refusal with its status and {error:{code,message}}, unlogged', () => {
    const { answer, logged } = answerTo(
      new DomainError('STATE.LOCKED', 'state a is locked by 123'),
    );
    expect(answer.status).toBe(423);
    expect(answer.body).toEqual({
      error: { code: 'STATE.LOCKED', message: 'state a is locked by 123' },
    });
    expect(logged).toEqual([]);
  });

  it('asks for a retry after a second on a 503', () => {
    const { answer } = answerTo(new DomainError('SERVER.LAGGING', 'written as version 3'));
    expect(answer.status).toBe(503);
    expect(answer.headers['Retry-After']).toBe('1');
  });

  it('asks for a retry after a second on a 429 (a caller past its bound)', () => {
    const { answer } = answerTo(new DomainError('REQUEST.TOO_MANY', 'token "ci" already has 5'));
    expect(answer.status).toBe(429);
    expect(answer.headers['Retry-After']).toBe('1');
  });

  it('answers an unexpected Error 500 with the request id, and logs it with its stack', () => {
    const { answer, logged } = answerTo(new TypeError('cannot read x of undefined'));
    expect(answer.status).toBe(500);
    expect(answer.body.error).toEqual({
      code: 'SERVER.ERROR',
      message: 'internal error (request id req-42)',
    });
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatchObject({ level: 50, requestId: 'req-42', msg: 'unhandled error' });
    expect((logged[0].err as { message: string }).message).toBe('cannot read x of undefined');
  });

  it('answers a code it does not know 500, logged, never a guessed 400', () => {
    const unknown = new DomainError('STATE.NO_SUCH_THING' as ErrorCode, 'detail for the log');
    const { answer, logged } = answerTo(unknown);
    expect(answer.status).toBe(500);
    expect(answer.body.error.code).toBe('SERVER.ERROR');
    expect(answer.body.error.message).not.toContain('detail for the log');
    expect(logged).toHaveLength(1);
  });

  it('answers a code that is never an HTTP answer (a kld exit code) as a logged 500', () => {
    const { answer, logged } = answerTo(new DomainError('CONFIG.INVALID', 'KL_LISTEN: bad'));
    expect(answer.status).toBe(500);
    expect(answer.body.error.code).toBe('SERVER.ERROR');
    expect(logged).toHaveLength(1);
  });

  it('logs why an answer already begun was cut off, and answers nothing more', () => {
    const failed = answerTo(new TypeError('page read failed'), true);
    expect(failed.answer.status).toBeUndefined();
    expect(failed.logged).toHaveLength(1);
    expect(failed.logged[0]).toMatchObject({
      level: 50,
      requestId: 'req-42',
      msg: 'answer cut off after it began',
    });
    const refused = answerTo(new DomainError('STATE.NOT_FOUND', 'state gone meanwhile'), true);
    expect(refused.answer.status).toBeUndefined();
    expect(refused.logged).toMatchObject([
      { level: 40, msg: 'answer cut off after it began', err: { message: 'state gone meanwhile' } },
    ]);
  });

  it("answers Nest's own 404 (no such route) as REQUEST.NOT_FOUND", () => {
    const { answer, logged } = answerTo(new NotFoundException('Cannot GET /nope'));
    expect(answer.status).toBe(404);
    expect(answer.body.error.code).toBe('REQUEST.NOT_FOUND');
    expect(logged).toEqual([]);
  });

  it('writes a conflict naming 10,000 holders a piece per turn, whole', async () => {
    const holders = Array.from({ length: 10_000 }, (_, i) => ({
      kind: 'apply',
      glob: `module.m${i % 50}.aws_instance.a${i}[0]`,
      mode: 'write',
      actor: 'ci',
      run_id: `run-${i}`,
    }));
    const err = withDetails(new DomainError('RESERVATION.CONFLICT', 'reserved by others'), {
      holders,
    });
    const written: { turn: number; text: string }[] = [];
    let turn = 0;
    const turning = setInterval(() => turn++, 0);
    const headers: Record<string, string> = {};
    const res = Object.assign(
      new Writable({
        decodeStrings: false,
        write(chunk: string, _encoding, done) {
          written.push({ turn, text: chunk });
          done();
        },
      }),
      {
        headersSent: false,
        statusCode: 0,
        setHeader: (name: string, value: string) => (headers[name] = value),
        getHeader: (name: string) => headers[name],
        status(code: number) {
          this.statusCode = code;
          return this;
        },
      },
    );
    const ended = new Promise((resolve) => res.once('finish', resolve));
    try {
      new ErrorFilter(
        createLogger('info', 'json', new Writable({ write: (_c, _e, done) => done() })),
      ).reply(err, { id: 'req-1' } as never, res as never);
      await ended;
    } finally {
      clearInterval(turning);
    }
    expect(res.statusCode).toBe(409);
    expect(JSON.parse(written.map((w) => w.text).join(''))).toEqual({
      error: { holders, code: 'RESERVATION.CONFLICT', message: 'reserved by others' },
    });
    // Over many turns: one res.json of all of it held kld's thread ~50 ms.
    expect(new Set(written.map((w) => w.turn)).size).toBeGreaterThan(3);
  });
});
