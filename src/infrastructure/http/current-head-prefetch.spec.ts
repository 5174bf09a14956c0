import type { Request, Response } from 'express';
import type { CurrentHead, StateDocumentReadModel } from '../read-models/state-document-read-model';
import { CurrentHeadPrefetch, prefetchedHead } from './current-head-prefetch';

/** A GET as the router hands it over: the wildcard's segments and the query. */
function get(segments: string[], query: Record<string, string> = {}): Request {
  return { params: { name: segments }, query } as unknown as Request;
}

function prefetch(currentHead: (name: string) => Promise<CurrentHead | null>) {
  const asked: string[] = [];
  const documents = {
    currentHead: (name: string) => {
      asked.push(name);
      return currentHead(name);
    },
  } as unknown as StateDocumentReadModel;
  return { middleware: new CurrentHeadPrefetch(documents), asked };
}

const ticks = () => new Promise((resolve) => setImmediate(resolve));

describe('CurrentHeadPrefetch', () => {
  it("starts the check of the named state's current version, for that name only, before passing the request on", async () => {
    const head = Promise.resolve(null);
    const { middleware, asked } = prefetch(() => head);
    const req = get(['team', 'prod', 'net']);
    const next = jest.fn();
    middleware.use(req, {} as Response, next);
    expect(asked).toEqual(['team/prod/net']);
    await ticks();
    expect(next).toHaveBeenCalledTimes(1);
    expect(next).toHaveBeenCalledWith();
    expect(prefetchedHead(req, 'team/prod/net')).toBe(head);
    expect(prefetchedHead(req, 'team/prod')).toBeUndefined();
    expect(prefetchedHead(get(['team', 'prod', 'net']), 'team/prod/net')).toBeUndefined();
  });

  it('starts nothing for a past version, an action or a name the handler refuses', () => {
    const { middleware, asked } = prefetch(() => Promise.resolve(null));
    for (const req of [
      get(['net'], { serial: '3' }),
      get(['net'], { version: '2' }),
      get(['net', 'refresh']),
      get(['..', 'net']),
      get(['a/b']), // an encoded slash inside one segment
    ]) {
      const next = jest.fn();
      middleware.use(req, {} as Response, next);
      expect(next).toHaveBeenCalledTimes(1);
      expect(prefetchedHead(req, 'net')).toBeUndefined();
    }
    expect(asked).toEqual([]);
  });

  it('leaves no unhandled rejection when the check fails for a request that never reaches the handler', async () => {
    const unhandled: unknown[] = [];
    const listener = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', listener);
    try {
      const { middleware } = prefetch(() => Promise.reject(new Error('database away')));
      middleware.use(get(['net']), {} as Response, jest.fn());
      await ticks();
      await ticks();
    } finally {
      process.off('unhandledRejection', listener);
    }
    expect(unhandled).toEqual([]);
  });
});
