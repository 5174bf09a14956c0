import express, { type Response } from 'express';
import type { Server } from 'node:http';
import { Writable } from 'node:stream';
import request from 'supertest';
import { Grants, parseScope } from '../../domain/auth';
import { DomainError } from '../../domain/shared/domain-error';
import type { Authenticator } from '../auth/authenticator';
import type { Logger } from '../logging/logger';
import type {
  CurrentHead,
  ServedDocument,
  StateDocumentReadModel,
} from '../read-models/state-document-read-model';
import { accessRuleOf, AUTH_UNAUTHENTICATED, type Principal } from './access';
import {
  CURRENT_DOCUMENT_PATH,
  CurrentDocumentRoute,
  sendDocument,
  WATCHED_DOCUMENT_BYTES,
} from './current-document-route';
import { ErrorFilter } from './error.filter';
import { TerraformBackendController } from './terraform-backend.controller';

const DOCUMENT: ServedDocument = {
  stateId: 'st-1',
  version: 7,
  parts: [Buffer.from('{"version":4,'), Buffer.from('"serial":3}')],
  size: 24,
  md5: 'bWQ1LW9mLXRoZS1ieXRlcw==',
};

const READER: Principal = {
  name: 'reader',
  username: null,
  grants: Grants.of([parseScope('read:team/*')]),
};

interface Setup {
  /** The document each state has, if any. */
  documents?: Record<string, ServedDocument>;
  /** Authentication on: `Bearer good` is READER, any other token is refused. */
  auth?: boolean;
  /** The check fails as when the database cannot be reached. */
  checkFails?: boolean;
}

/**
 * The route ahead of a stand-in for the controller (which answers 299 with
 * the principal it was handed), on an Express app as kld builds it.
 */
async function serve(setup: Setup) {
  const events: string[] = [];
  const documents = {
    currentHead: (name: string): Promise<CurrentHead | null> => {
      events.push(`check ${name}`);
      if (setup.checkFails) {
        return Promise.reject(
          Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }),
        );
      }
      const doc = setup.documents?.[name];
      return Promise.resolve(doc ? { ...doc, held: undefined, chunks: ['c1'] } : null);
    },
    currentBody: async (name: string, head: Promise<CurrentHead | null>) => {
      const found = await head;
      events.push(`body ${name}`);
      return found === null ? null : setup.documents![name];
    },
  } as unknown as StateDocumentReadModel;
  const authenticator = setup.auth
    ? ({
        authenticate: async (req: express.Request) => {
          events.push('authenticate');
          if (req.header('authorization') === 'Bearer good') return READER;
          throw new DomainError(AUTH_UNAUTHENTICATED, 'the token is not valid');
        },
      } as unknown as Authenticator)
    : null;
  const logged: string[] = [];
  const logger = {
    warn: (_f: unknown, msg: string) => logged.push(msg),
    error: (_f: unknown, msg: string) => logged.push(msg),
  } as unknown as Logger;
  const route = new CurrentDocumentRoute(
    documents,
    authenticator,
    new ErrorFilter(logger),
    accessRuleOf(TerraformBackendController.prototype.get),
  );
  const app = express();
  app.get(CURRENT_DOCUMENT_PATH, route.handle);
  app.get(CURRENT_DOCUMENT_PATH, (req, res) => {
    const principal = (req as { principal?: Principal }).principal;
    res.status(299).json({ controller: true, principal: principal?.name ?? null });
  });
  const server: Server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  return { http: request(server), server, events, logged };
}

describe('CurrentDocumentRoute', () => {
  let server: Server | undefined;
  afterEach(async () => {
    await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
    server = undefined;
  });

  it('answers the current document whole, with its length, MD5 and version, without the controller', async () => {
    const s = await serve({ documents: { 'team/prod/net': DOCUMENT } });
    server = s.server;
    const res = await s.http
      .get('/v1/states/team/prod/net')
      .buffer(true)
      .parse((r, done) => {
        let text = '';
        r.on('data', (c: Buffer) => (text += c.toString()));
        r.on('end', () => done(null, text));
      });
    expect(res.status).toBe(200);
    expect(res.body).toBe('{"version":4,"serial":3}');
    expect(res.headers['content-type']).toBe('application/json');
    expect(res.headers['content-length']).toBe('24');
    expect(res.headers['content-md5']).toBe(DOCUMENT.md5);
    expect(res.headers['x-kilolock-state-version']).toBe('7');
    expect(s.events).toEqual(['check team/prod/net', 'body team/prod/net']);
  });

  it('passes a past version, an action, a name the controller refuses and a missing document on to the controller', async () => {
    const s = await serve({ documents: { net: DOCUMENT } });
    server = s.server;
    for (const path of [
      '/v1/states/net?serial=3',
      '/v1/states/net?version=2',
      '/v1/states/net/refresh',
      '/v1/states/../net',
      '/v1/states/a%2Fb',
    ]) {
      const res = await s.http.get(path);
      expect({ path, status: res.status, body: res.body }).toEqual({
        path,
        status: 299,
        body: { controller: true, principal: null },
      });
    }
    // Checked only for a name the controller would serve.
    expect(s.events).toEqual([]);
    const missing = await s.http.get('/v1/states/nothing-here');
    expect(missing.status).toBe(299);
    // Passed on once the check found nothing, the request already admitted.
    expect(s.events).toEqual(['check nothing-here', 'body nothing-here']);
  });

  it('with authentication on, sends the check before authenticating and serves what the token may read', async () => {
    const s = await serve({ auth: true, documents: { 'team/net': DOCUMENT } });
    server = s.server;
    const res = await s.http.get('/v1/states/team/net').set('Authorization', 'Bearer good');
    expect(res.status).toBe(200);
    expect(s.events).toEqual(['check team/net', 'authenticate', 'body team/net']);
  });

  it('refuses as the AuthGuard does: 401 with the challenge, 403 naming the token and the state, no document read', async () => {
    const s = await serve({ auth: true, documents: { 'team/net': DOCUMENT, 'ops/net': DOCUMENT } });
    server = s.server;
    const none = await s.http.get('/v1/states/team/net').set('Authorization', 'Bearer wrong');
    expect(none.status).toBe(401);
    expect(none.headers['www-authenticate']).toBe('Basic realm="kilolock", charset="UTF-8"');
    expect(none.body).toEqual({
      error: { code: 'AUTH.UNAUTHENTICATED', message: 'the token is not valid' },
    });
    const other = await s.http.get('/v1/states/ops/net').set('Authorization', 'Bearer good');
    expect(other.status).toBe(403);
    expect(other.body).toEqual({
      error: {
        code: 'AUTH.FORBIDDEN',
        message: 'token "reader" may not read state ops/net (its scopes: read:team/*)',
      },
    });
    expect(s.events.filter((e) => e.startsWith('body'))).toEqual([]);
  });

  it("answers a failed check as the ErrorFilter does (503, retry), and a refused request's failed check rejects nothing unhandled", async () => {
    const unhandled: unknown[] = [];
    const listener = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', listener);
    try {
      const s = await serve({ checkFails: true, auth: true });
      server = s.server;
      const failed = await s.http.get('/v1/states/team/net').set('Authorization', 'Bearer good');
      expect(failed.status).toBe(503);
      expect(failed.headers['retry-after']).toBe('1');
      expect(failed.body.error.code).toBe('SERVER.UNAVAILABLE');
      expect(s.logged).toEqual(['database unavailable']);
      const refused = await s.http.get('/v1/states/team/net').set('Authorization', 'Bearer wrong');
      expect(refused.status).toBe(401);
      await new Promise((resolve) => setImmediate(resolve));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', listener);
    }
  });
});

describe('sendDocument', () => {
  it('writes a big document from the served parts themselves, all in one vectored write', async () => {
    // 40 parts of 100 KiB: 3.9 MiB, over the size ended in the same turn.
    const parts = Array.from({ length: 40 }, (_, i) => Buffer.alloc(100 * 1024, 97 + (i % 26)));
    const size = parts.reduce((sum, part) => sum + part.length, 0);
    expect(size).toBeGreaterThan(WATCHED_DOCUMENT_BYTES);
    const writes: Buffer[][] = [];
    const out = new Writable({
      highWaterMark: 16 * 1024,
      writev(chunks, done) {
        writes.push(chunks.map(({ chunk }) => chunk as Buffer));
        setImmediate(done);
      },
      write(chunk: Buffer, _encoding, done) {
        writes.push([chunk]);
        setImmediate(done);
      },
    });
    const headers: Record<string, unknown> = {};
    const res = Object.assign(out, {
      statusCode: 0,
      setHeader: (name: string, value: unknown) => (headers[name] = value),
    }) as unknown as Response;
    await sendDocument(res, { version: 3, parts, size, md5: 'bWQ1' });

    expect(headers['Content-Length']).toBe(size);
    // No part joined with another (a copy of a big document per GET fed V8's
    // external-memory allowance, a full collection every few GETs), and none
    // held back for a later turn (a piece of 1 MiB per turn cost kld about 40 %
    // more CPU per GET of a 20k state): the very Buffers served, in order, in
    // one vectored write (the end's empty chunk aside).
    const groups = writes.filter((group) => group.some((buffer) => buffer.length > 0));
    expect(groups).toHaveLength(1);
    expect(groups[0]).toHaveLength(parts.length);
    groups[0].forEach((buffer, i) => expect(buffer).toBe(parts[i]));
  });
});
