import { CallerBounds } from './caller-bounds';
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
