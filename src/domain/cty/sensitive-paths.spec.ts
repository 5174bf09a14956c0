import { renderPath, toStatePath } from './attribute-path';
import { renderDiagnostic } from './diagnostic';
import { SchemaBlock } from './schema';
import { sensitivePaths } from './sensitive-paths';

const block: SchemaBlock = {
  attributes: [
    { name: 'name', type: 'string' },
    { name: 'value', type: 'string', sensitive: true },
    {
      name: 'creds',
      nestedType: {
        nesting: 'map',
        attributes: [{ name: 'password', type: 'string', sensitive: true }],
      },
    },
  ],
  blockTypes: [
    {
      typeName: 'rule',
      nesting: 'list',
      block: { attributes: [{ name: 'secret', type: 'string', sensitive: true }], blockTypes: [] },
    },
    {
      typeName: 'grant',
      nesting: 'set',
      block: { attributes: [{ name: 'token', type: 'string', sensitive: true }], blockTypes: [] },
    },
    {
      typeName: 'plain',
      nesting: 'list',
      block: { attributes: [{ name: 'x', type: 'string' }], blockTypes: [] },
    },
  ],
};

describe('sensitive paths', () => {
  it('marks sensitive attributes, null or not, and each element of nested blocks and attributes', () => {
    const paths = sensitivePaths(block, {
      name: 'n',
      value: null,
      creds: { admin: { password: 'p' } },
      rule: [{ secret: 'a' }, { secret: 'b' }],
      grant: [{ token: 't' }],
      plain: [{ x: '1' }],
    }).map(renderPath);
    expect(paths.sort()).toEqual([
      'creds["admin"].password',
      'grant',
      'rule[0].secret',
      'rule[1].secret',
      'value',
    ]);
  });

  it('writes paths in the shape of a v4 state file', () => {
    expect(
      toStatePath([
        { kind: 'attribute', name: 'rule' },
        { kind: 'index', index: 0 },
        { kind: 'attribute', name: 'secret' },
        { kind: 'key', key: 'k' },
      ]),
    ).toEqual([
      { type: 'get_attr', value: 'rule' },
      { type: 'index', value: { value: 0, type: 'number' } },
      { type: 'get_attr', value: 'secret' },
      { type: 'index', value: { value: 'k', type: 'string' } },
    ]);
  });

  it('renders diagnostics with their attribute path', () => {
    expect(
      renderDiagnostic({
        severity: 'error',
        summary: 'Invalid value',
        detail: 'must be Enabled or Suspended',
        attribute: [
          { kind: 'attribute', name: 'versioning_configuration' },
          { kind: 'index', index: 0 },
          { kind: 'attribute', name: 'status' },
        ],
      }),
    ).toBe(
      'Error: Invalid value: must be Enabled or Suspended (at versioning_configuration[0].status)',
    );
  });
});
