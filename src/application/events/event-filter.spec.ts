import { DomainError } from '../../domain/shared/domain-error';
import { EventFilter } from './event-filter';

describe('EventFilter state globs', () => {
  it('refuses a glob with more than two wildcards, whose matching could run for ages', () => {
    // picomatch makes each * a lazy [^/]*?: against a long name, 26 of them
    // backtrack for longer than anyone waits, on kld's one thread.
    for (const glob of ['*a'.repeat(25) + '*b', '*a*a*b', '**/x/**/y/**', 'a*/b*/c*']) {
      let refused: unknown;
      try {
        EventFilter.compile({ states: [glob] });
      } catch (err) {
        refused = err;
      }
      expect(refused).toBeInstanceOf(DomainError);
      expect(refused).toMatchObject({
        code: 'EVENTS.INVALID_FILTER',
        message: expect.stringContaining('a glob has at most 2 (* or **)'),
      });
    }
  });

  it('matches with up to two wildcards as documented: * one level, ** any depth, {a,b}', () => {
    const matches = (glob: string, name: string) =>
      EventFilter.compile({ states: [glob] }).matchesState(name);
    expect(matches('team/*', 'team/prod')).toBe(true);
    expect(matches('team/*', 'team/prod/db')).toBe(false);
    expect(matches('team/**', 'team/prod/db')).toBe(true);
    expect(matches('{a,b}/*-*', 'b/x-y')).toBe(true);
    expect(matches('*a*b', 'a'.repeat(512))).toBe(false);
    expect(matches('*a*b', `${'a'.repeat(510)}b`)).toBe(true);
  });
});
