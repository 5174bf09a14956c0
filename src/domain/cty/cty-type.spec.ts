import { CtyError } from './cty-error';
import { ctyTypeJson, parseCtyType } from './cty-type';

describe('cty type JSON', () => {
  it('parses and writes back every kind of type', () => {
    const types = [
      'string',
      'number',
      'bool',
      'dynamic',
      ['list', 'string'],
      ['set', ['map', 'number']],
      ['tuple', ['string', 'bool']],
      ['object', { a: 'string', b: ['list', 'number'] }],
      ['object', { a: 'string', b: 'number' }, ['b']],
    ];
    for (const t of types) expect(ctyTypeJson(parseCtyType(t))).toEqual(t);
  });

  it('refuses malformed types', () => {
    for (const bad of ['text', ['list'], ['object', 'x'], 5, null]) {
      expect(() => parseCtyType(bad)).toThrow(CtyError);
    }
  });
});
