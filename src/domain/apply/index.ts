export * from './apply-run.commands';
export * from './apply-run.decider';
export * from './apply-run.errors';
export * from './apply-run.events';
export * from './apply-run.model';
export * from './apply-run.snapshot';
export * from './apply-stream';
