import { execFileSync } from 'node:child_process';
import * as path from 'node:path';

interface Case {
  file: string;
  code: string;
}

/** The rules that keep the layers apart (eslint.config.mjs). */
const LAYER_RULES = [
  'no-restricted-imports',
  'no-restricted-properties',
  'no-restricted-syntax',
  'no-restricted-globals',
];

// ESLint loads its flat config with import(), which Jest's module system
// does not run: lint in a child process, all cases in one.
const LINT = `
const { ESLint } = require('eslint');
let input = '';
process.stdin.on('data', (d) => (input += d));
process.stdin.on('end', async () => {
  const eslint = new ESLint();
  const out = [];
  for (const c of JSON.parse(input)) {
    const [result] = await eslint.lintText(c.code, { filePath: c.file });
    out.push(result.messages.map((m) => ({ rule: m.ruleId, message: m.message })));
  }
  process.stdout.write(JSON.stringify(out));
});
`;

function lint(cases: Case[]): { rule: string | null; message: string }[][] {
  const root = path.resolve(__dirname, '../..');
  const out = execFileSync(process.execPath, ['-e', LINT], {
    cwd: root,
    input: JSON.stringify(cases.map((c) => ({ ...c, file: path.join(root, c.file) }))),
    encoding: 'utf8',
  });
  return JSON.parse(out);
}

/** Layer-rule messages for each case; [] when the layers allow it. */
function layerErrors(cases: Case[]): string[][] {
  return lint(cases).map((messages) =>
    messages.filter((m) => LAYER_RULES.includes(m.rule ?? '')).map((m) => m.message),
  );
}

const use = (from: string, what = 'X') =>
  `import { ${what} } from '${from}';\nexport { ${what} };\n`;

describe('lint keeps the layers apart', () => {
  it('refuses what each layer may not import, and allows the rest', () => {
    const cases: [Case, RegExp | null][] = [
      [{ file: 'src/domain/state/x.ts', code: use('pg', 'Pool') }, /PostgreSQL/],
      [{ file: 'src/domain/state/x.ts', code: use('@nestjs/common', 'Injectable') }, /no Nest/],
      [{ file: 'src/domain/state/x.ts', code: use('node:fs', 'readFileSync') }, /no I\/O/],
      [{ file: 'src/domain/state/x.ts', code: use('fs', 'readFileSync') }, /no I\/O/],
      [
        { file: 'src/domain/state/x.ts', code: use('../../application/ports/clock.port') },
        /no other layer/,
      ],
      [
        { file: 'src/domain/state/x.ts', code: use('../../infrastructure/postgres/database') },
        /no other layer/,
      ],
      [
        { file: 'src/domain/state/x.ts', code: use('../../projections/projector') },
        /no other layer/,
      ],
      [{ file: 'src/domain/state/x.ts', code: 'export const t = Date.now();\n' }, /Time enters/],
      [{ file: 'src/domain/state/x.ts', code: 'export const t = new Date();\n' }, /Time enters/],
      [{ file: 'src/domain/state/x.ts', code: use('node:crypto', 'createHash') }, null],
      [{ file: 'src/domain/state/x.ts', code: 'export const t = new Date(0);\n' }, null],
      [{ file: 'src/application/x.ts', code: use('../infrastructure/postgres/database') }, /ports/],
      [{ file: 'src/application/x.ts', code: use('../projections/projection-runner') }, /ports/],
      [{ file: 'src/application/x.ts', code: use('pg', 'Pool') }, /PostgreSQL/],
      [{ file: 'src/application/x.ts', code: use('../app/state.module') }, /composition root/],
      [{ file: 'src/application/x.ts', code: use('@nestjs/cqrs', 'CommandBus') }, null],
      [
        { file: 'src/infrastructure/http/x.ts', code: use('../../app/kilolock.module') },
        /composition root/,
      ],
      [
        { file: 'src/infrastructure/http/x.ts', code: use('../../projections/projection-runner') },
        /ports/,
      ],
      [
        { file: 'src/infrastructure/http/x.ts', code: use('../../application/ports/clock.port') },
        null,
      ],
      [
        {
          file: 'src/projections/state/x.ts',
          code: use('../../infrastructure/event-store/postgres-event-store'),
        },
        /event-store port/,
      ],
      [
        { file: 'src/projections/state/x.ts', code: use('../../infrastructure/postgres/database') },
        null,
      ],
      [
        { file: 'src/cli/commands/x.ts', code: use('../../projections/projection-runner') },
        /ports/,
      ],
      [{ file: 'src/app/x.module.ts', code: use('../infrastructure/postgres/database') }, null],
      [{ file: 'src/ui/pages/x.tsx', code: use('../../infrastructure/http/caller') }, /HTTP only/],
      [{ file: 'src/ui/x.ts', code: use('node:fs', 'readFileSync') }, /browser/],
      [{ file: 'src/ui/x.ts', code: use('../domain/cty/mask-sensitive', 'maskSensitive') }, null],
      // Tests wire real adapters.
      [{ file: 'src/domain/state/x.spec.ts', code: use('pg', 'Pool') }, null],
    ];
    const errors = layerErrors(cases.map(([c]) => c));
    cases.forEach(([c, expected], i) => {
      const got = { file: c.file, code: c.code, errors: errors[i] };
      if (expected === null) expect(got).toEqual({ ...got, errors: [] });
      else expect(got).toEqual({ ...got, errors: [expect.stringMatching(expected)] });
    });
  });
});
