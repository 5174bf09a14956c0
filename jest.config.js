/**
 * One configuration for all tiers: unit (*.spec.ts), integration
 * (*.int-spec.ts, real PostgreSQL) and e2e (*.e2e-spec.ts, real processes).
 * The global setup starts one embedded PostgreSQL for the whole run.
 */
module.exports = {
  rootDir: '.',
  testMatch: ['<rootDir>/{src,test}/**/*.{spec,int-spec,e2e-spec}.ts'],
  transform: { '^.+\\.ts$': ['@swc/jest'] },
  moduleFileExtensions: ['ts', 'js', 'json'],
  testEnvironment: 'node',
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  testTimeout: 60000,
  maxWorkers: 2,
};
