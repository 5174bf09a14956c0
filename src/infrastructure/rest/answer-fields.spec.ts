import { parseJsonExact } from '../../domain/terraform/lossless-json';
import { checkEachFields, checkFields } from './answer-fields';

describe('checkFields', () => {
  it('passes the fields kl reads, null or missing where optional, numbers beyond double precision', () => {
    const answer = parseJsonExact('{"run_id":"r","from_version":123456789012345678901234,"x":1}');
    expect(() =>
      checkFields(answer, { run_id: 'string', from_version: 'number', to: 'number?' }, 'GET /r'),
    ).not.toThrow();
  });

  it('names the request (without its query), the row and the field', () => {
    const rows = [{ scopes: ['a'] }, { scopes: ['a', 5] }];
    expect(() => checkEachFields(rows, { scopes: 'strings' }, 'GET /t?all=true', 'tokens')).toThrow(
      "kld's answer to GET /t: tokens[1].scopes is not a list of strings",
    );
    expect(() => checkFields(null, { current: 'object?', version: 'string' }, 'GET /v')).toThrow(
      "kld's answer to GET /v: version is not a string",
    );
  });
});
