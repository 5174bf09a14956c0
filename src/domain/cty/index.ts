export * from './attribute-path';
export * from './cty-codec';
export * from './cty-error';
export * from './cty-type';
export * from './diagnostic';
export * from './implied-type';
export * from './schema';
export * from './sensitive-paths';
