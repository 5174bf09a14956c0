import { EventEmitter } from 'node:events';
import type { ExecutionContext } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { CallerBoundGuard, CallerBounds, Heavy } from './caller-bounds';
import { DEFAULT_CALLER_LIMITS, DEFAULT_TOTAL_LIMITS } from './caller-limits';

const bounds = () => new CallerBounds({ ...DEFAULT_CALLER_LIMITS, query: 2, export: 1 });

describe('CallerBounds', () => {
  it('lets a caller have its bound of a kind in flight, and refuses the next', () => {
    const b = bounds();
    expect(b.tryAcquire('query', 'a')).toEqual(expect.any(Function));
    expect(b.tryAcquire('query', 'a')).toEqual(expect.any(Function));
    expect(b.tryAcquire('query', 'a')).toBe('caller');
    expect(b.held('query', 'a')).toBe(2);
  });

  it('counts each caller and each kind on its own', () => {
    const b = bounds();
    expect(b.tryAcquire('export', 'a')).toEqual(expect.any(Function));
    expect(b.tryAcquire('export', 'a')).toBe('caller');
    expect(b.tryAcquire('export', 'b')).toEqual(expect.any(Function));
    expect(b.tryAcquire('query', 'a')).toEqual(expect.any(Function));
  });

  it('refuses one past the bound across callers, each caller within its own', () => {
    const b = new CallerBounds(
      { ...DEFAULT_CALLER_LIMITS, export: 2 },
      { ...DEFAULT_TOTAL_LIMITS, export: 3 },
    );
    expect(b.tryAcquire('export', 'a')).toEqual(expect.any(Function));
    expect(b.tryAcquire('export', 'a')).toEqual(expect.any(Function));
    const third = b.tryAcquire('export', 'b') as () => void;
    expect(third).toEqual(expect.any(Function));
    expect(b.tryAcquire('export', 'c')).toBe('total');
    // Another kind has its own total.
    expect(b.tryAcquire('query', 'c')).toEqual(expect.any(Function));
    third();
    expect(b.tryAcquire('export', 'c')).toEqual(expect.any(Function));
  });

  it('frees a slot when a request ends, once however often it is released', () => {
    const b = bounds();
    const first = b.tryAcquire('export', 'a') as () => void;
    first();
    first();
    expect(b.held('export', 'a')).toBe(0);
    const second = b.tryAcquire('export', 'a');
    expect(second).toEqual(expect.any(Function));
    first();
    expect(b.tryAcquire('export', 'a')).toBe('caller');
  });
});

describe('CallerBoundGuard', () => {
  class Route {
    @Heavy('export')
    export() {}
  }
  const guardWith = (b: CallerBounds) => new CallerBoundGuard(new Reflector(), b);
  const context = (res: EventEmitter & { closed: boolean }, token = 'ci') =>
    ({
      getHandler: () => Route.prototype.export,
      switchToHttp: () => ({
        getRequest: () => ({
          principal: { name: token, username: null, grants: null },
          socket: { remoteAddress: '127.0.0.1' },
        }),
        getResponse: () => res,
      }),
    }) as unknown as ExecutionContext;
  const response = (closed = false) => Object.assign(new EventEmitter(), { closed });

  it('holds the slot until the response closes', () => {
    const b = bounds();
    const res = response();
    expect(guardWith(b).canActivate(context(res))).toBe(true);
    expect(() => guardWith(b).canActivate(context(response()))).toThrow(
      expect.objectContaining({ code: 'REQUEST.TOO_MANY' }),
    );
    res.emit('close');
    expect(b.held('export', 'token ci')).toBe(0);
  });

  it('refuses the request of a caller within its bound once all callers hold the total', () => {
    const b = new CallerBounds(DEFAULT_CALLER_LIMITS, { ...DEFAULT_TOTAL_LIMITS, export: 2 });
    expect(guardWith(b).canActivate(context(response(), 'alice'))).toBe(true);
    expect(guardWith(b).canActivate(context(response(), 'bob'))).toBe(true);
    expect(() => guardWith(b).canActivate(context(response(), 'carol'))).toThrow(
      expect.objectContaining({
        code: 'REQUEST.TOO_MANY',
        message: expect.stringContaining('KL_TOTAL_EXPORTS=2'),
      }),
    );
  });

  it('frees at once the slot of a client gone before the guard ran', () => {
    const b = bounds();
    expect(guardWith(b).canActivate(context(response(true)))).toBe(true);
    expect(b.held('export', 'token ci')).toBe(0);
  });
});
