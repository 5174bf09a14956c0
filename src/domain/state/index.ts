export * from './lock-info';
export * from './state-stream';
export * from './state.commands';
export * from './state.decider';
export * from './state.errors';
export * from './state.events';
export * from './state.model';
export * from './state.snapshot';
