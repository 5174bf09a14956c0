export const CLOCK = Symbol('Clock');
export const IDS = Symbol('Ids');
/** Ids of the events a command appends: time-ordered, so the log's index on them grows at one end. */
export const EVENT_IDS = Symbol('EventIds');

export interface Clock {
  now(): Date;
}

export interface Ids {
  uuid(): string;
}
