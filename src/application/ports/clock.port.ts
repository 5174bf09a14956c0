export const CLOCK = Symbol('Clock');
export const IDS = Symbol('Ids');

export interface Clock {
  now(): Date;
}

export interface Ids {
  uuid(): string;
}
