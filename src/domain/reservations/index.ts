export * from './address-glob';
export * from './glob-index';
