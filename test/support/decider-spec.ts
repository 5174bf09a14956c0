import type { Decider } from '../../src/domain/shared/decider';
import { DomainError } from '../../src/domain/shared/domain-error';
import type { DomainEvent } from '../../src/domain/shared/event';

/** History is written as events, singly or in groups (a command's events stay together). */
type History<E> = readonly (E | readonly E[])[];

/**
 * The given/when/then decider spec: `given(events…)` folds the history into
 * a state with `evolve`; `.when(command)` decides on it; `.then(events)`
 * expects exactly those events, `.thenFails(code, metadata?)` a DomainError
 * with that code (and that metadata, when given). `.events()` hands back
 * what was decided for finer assertions.
 */
export function deciderSpec<C, S, E extends DomainEvent>(decider: Decider<C, S, E>) {
  const fold = (history: History<E>): S =>
    (history.flat() as E[]).reduce(decider.evolve, decider.initialState());

  return {
    given(...history: History<E>) {
      const state = fold(history);
      return {
        state,
        when(command: C) {
          return {
            then(expected: E[]): void {
              expect(decider.decide(command, state)).toEqual(expected);
            },
            thenFails(code: string, metadata?: Record<string, unknown>): void {
              let error: unknown;
              try {
                decider.decide(command, state);
              } catch (e) {
                error = e;
              }
              expect(error).toBeInstanceOf(DomainError);
              expect((error as DomainError).code).toBe(code);
              if (metadata) expect((error as DomainError).metadata).toEqual(metadata);
            },
            events(): E[] {
              return decider.decide(command, state);
            },
          };
        },
      };
    },

    /** The events `command` decides on top of `history`: for histories too long to spell out. */
    eventsOf(history: History<E>, command: C): E[] {
      return decider.decide(command, fold(history));
    },
  };
}
