export * from './scopes';
export * from './token';
