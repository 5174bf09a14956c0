/**
 * One configuration for all tiers: unit (*.spec.ts), integration
 * (*.int-spec.ts, real PostgreSQL) and e2e (*.e2e-spec.ts, real processes).
 * The global setup starts one embedded PostgreSQL for the whole run.
 */
module.exports = {
  rootDir: '.',
  testMatch: ['<rootDir>/{src,test}/**/*.{spec,int-spec,e2e-spec}.ts'],
  transform: {
    '^.+\\.ts$': ['@swc/jest'],
    // NestJS 12 ships ES modules; Node runs them (require(esm)), Jest's
    // module loader does not, so in-process tests compile them to CommonJS.
    '^.+\\.m?js$': ['@swc/jest', { jsc: { target: 'es2022' }, module: { type: 'commonjs' } }],
  },
  transformIgnorePatterns: [
    '/node_modules/(?!(@nestjs|uid|file-type|strtok3|token-types|@borewit|@tokenizer)/)',
  ],
  moduleFileExtensions: ['ts', 'js', 'json'],
  testEnvironment: 'node',
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  testTimeout: 60000,
  maxWorkers: 2,
};
