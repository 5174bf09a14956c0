export * from './plan-delta';
export * from './quota';
export * from './quota-limits';
