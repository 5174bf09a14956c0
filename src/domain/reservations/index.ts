export * from './address-glob';
