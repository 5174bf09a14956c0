import { DomainEvent } from './event';

/**
 * An aggregate's behaviour as three pure pieces: what it decides given a
 * command and its state, how an event changes the state, and where it starts.
 * `decide` throws a DomainError to refuse a command.
 */
export interface Decider<Command, State, Event extends DomainEvent> {
  decide(command: Command, state: State): Event[];
  evolve(state: State, event: Event): State;
  initialState(): State;
}
