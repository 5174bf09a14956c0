import { EventEmitter } from 'node:events';
import type { ExecutionContext } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { CallerBoundGuard, CallerBounds, Heavy } from './caller-bounds';
import { DEFAULT_CALLER_LIMITS } from './caller-limits';

const bounds = () => new CallerBounds({ ...DEFAULT_CALLER_LIMITS, query: 2, export: 1 });

describe('CallerBounds', () => {
  it('lets a caller have its bound of a kind in flight, and refuses the next', () => {
    const b = bounds();
    expect(b.tryAcquire('query', 'a')).not.toBeNull();
    expect(b.tryAcquire('query', 'a')).not.toBeNull();
    expect(b.tryAcquire('query', 'a')).toBeNull();
    expect(b.held('query', 'a')).toBe(2);
  });

  it('counts each caller and each kind on its own', () => {
    const b = bounds();
    expect(b.tryAcquire('export', 'a')).not.toBeNull();
    expect(b.tryAcquire('export', 'a')).toBeNull();
    expect(b.tryAcquire('export', 'b')).not.toBeNull();
    expect(b.tryAcquire('query', 'a')).not.toBeNull();
  });

  it('frees a slot when a request ends, once however often it is released', () => {
    const b = bounds();
    const first = b.tryAcquire('export', 'a')!;
    first();
    first();
    expect(b.held('export', 'a')).toBe(0);
    const second = b.tryAcquire('export', 'a');
    expect(second).not.toBeNull();
    first();
    expect(b.tryAcquire('export', 'a')).toBeNull();
  });
});

describe('CallerBoundGuard', () => {
  class Route {
    @Heavy('export')
    export() {}
  }
  const guardWith = (b: CallerBounds) => new CallerBoundGuard(new Reflector(), b);
  const context = (res: EventEmitter & { closed: boolean }) =>
    ({
      getHandler: () => Route.prototype.export,
      switchToHttp: () => ({
        getRequest: () => ({
          principal: { name: 'ci', username: null, grants: null },
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

  it('frees at once the slot of a client gone before the guard ran', () => {
    const b = bounds();
    expect(guardWith(b).canActivate(context(response(true)))).toBe(true);
    expect(b.held('export', 'token ci')).toBe(0);
  });
});
