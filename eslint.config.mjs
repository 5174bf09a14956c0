import js from '@eslint/js';
import tseslint from 'typescript-eslint';

// Tests and fixtures compose layers (a test wires real adapters), so the
// layer rules below hold for the code they test, not for them.
const TESTS = ['**/*.spec.ts', '**/*.int-spec.ts', '**/*.e2e-spec.ts', '**/__fixtures__/**'];

/** Which imports a layer may not have: [regex on the import path, why]. */
function layer(files, forbidden, extraRules = {}) {
  return {
    files,
    ignores: TESTS,
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: forbidden.map(([regex, message]) => ({ regex, message })) },
      ],
      ...extraRules,
    },
  };
}

const dir = (name) => `(^|/)${name}(/|$)`;
const NO_APP = [dir('app'), 'src/app is the composition root: nothing imports it.'];
const NO_CLI = [dir('cli'), 'src/cli is the kl client: nothing imports it.'];
const NO_PROJECTIONS = [dir('projections'), 'Projections are reached through application ports.'];
const NO_INFRASTRUCTURE = [
  dir('infrastructure'),
  'Adapters are reached through ports (src/application/ports) bound in src/app.',
];
const NO_PG = ['^pg(/|$)', 'PostgreSQL belongs to src/infrastructure (and the projectors).'];

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**', '.kilolock/**', 'examples/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' },
      ],
    },
  },
  {
    files: ['**/*.js'],
    languageOptions: {
      sourceType: 'commonjs',
      globals: {
        module: 'writable',
        require: 'readonly',
        __dirname: 'readonly',
        process: 'readonly',
      },
    },
  },
  {
    files: ['src/domain/**/*.ts', 'src/application/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'error' },
  },
  // The layers (docs/architecture.md). test/lint/layers.spec.ts
  // proves each rule fails on a violation.
  layer(
    ['src/domain/**/*.ts'],
    [
      [dir('(application|infrastructure|projections)'), 'src/domain imports no other layer.'],
      NO_APP,
      NO_CLI,
      ['^@nestjs/', 'src/domain is plain TypeScript: no Nest.'],
      NO_PG,
      ['^node:(?!crypto$)', 'src/domain does no I/O (node:crypto only, for hashing).'],
      [
        '^(fs|net|http|https|http2|child_process|dgram|dns|tls|os|worker_threads|readline)(/|$)',
        'src/domain does no I/O.',
      ],
    ],
    {
      'no-restricted-properties': [
        'error',
        { object: 'Date', property: 'now', message: 'Time enters the domain through commands.' },
        { object: 'Math', property: 'random', message: 'Ids enter the domain through commands.' },
      ],
      'no-restricted-syntax': [
        'error',
        {
          selector: "NewExpression[callee.name='Date'][arguments.length=0]",
          message: 'Time enters the domain through commands.',
        },
      ],
      'no-restricted-globals': [
        'error',
        { name: 'process', message: 'src/domain reads no environment.' },
        { name: 'fetch', message: 'src/domain does no I/O.' },
        { name: 'setTimeout', message: 'src/domain has no clock.' },
        { name: 'setInterval', message: 'src/domain has no clock.' },
      ],
    },
  ),
  layer(['src/application/**/*.ts'], [NO_INFRASTRUCTURE, NO_PROJECTIONS, NO_APP, NO_CLI, NO_PG]),
  layer(['src/infrastructure/**/*.ts'], [NO_PROJECTIONS, NO_APP, NO_CLI]),
  layer(
    ['src/projections/**/*.ts'],
    [
      [
        dir('infrastructure/(event-store|http|read-models|refresh|rest)'),
        'Projectors read events through the event-store port (EVENT_STORE), and write only their own tables.',
      ],
      NO_APP,
      NO_CLI,
    ],
  ),
  layer(['src/cli/**/*.ts'], [NO_PROJECTIONS, NO_APP]),
  // The dashboard runs in the browser: it reaches kld over HTTP only, and
  // shares nothing with the server but the pure domain (masking, paths).
  layer(
    ['src/ui/**/*.{ts,tsx}'],
    [
      [dir('(application|infrastructure|projections)'), 'src/ui talks to kld over HTTP only.'],
      NO_APP,
      NO_CLI,
      ['^node:', 'src/ui runs in the browser.'],
    ],
  ),
  {
    files: [
      '**/*.spec.ts',
      '**/*.int-spec.ts',
      '**/*.e2e-spec.ts',
      'test/**/*.ts',
      'bench/**/*.ts',
    ],
    rules: { '@typescript-eslint/no-non-null-assertion': 'off' },
  },
);
