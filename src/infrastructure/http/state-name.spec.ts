import * as fs from 'node:fs';
import * as path from 'node:path';
import { DomainError } from '../../domain/shared/domain-error';
import { MAX_STATE_NAME_CHARS, stateNameFrom } from './state-name';

function refusal(name: string): string {
  try {
    stateNameFrom(name);
  } catch (err) {
    expect(err).toBeInstanceOf(DomainError);
    expect((err as DomainError).code).toBe('REQUEST.INVALID');
    return (err as Error).message;
  }
  throw new Error(`${name} was taken`);
}

describe('state names', () => {
  it('takes path-like names up to the longest the README states', () => {
    const readme = fs.readFileSync(path.join(__dirname, '../../../README.md'), 'utf8');
    const stated = /State names are path-like[^]*?at most (\d+) characters in all/.exec(readme);
    expect(Number(stated?.[1])).toBe(MAX_STATE_NAME_CHARS);
    const longest = `team/${'a'.repeat(MAX_STATE_NAME_CHARS - 5)}`;
    expect(stateNameFrom(longest)).toBe(longest);
    expect(stateNameFrom('team/prod/net.v2@eu+1=x_y-z')).toBe('team/prod/net.v2@eu+1=x_y-z');
  });

  it('says a name is too long, not that its characters are wrong', () => {
    const message = refusal(`team/${'a'.repeat(MAX_STATE_NAME_CHARS - 4)}`);
    expect(message).toContain(`longer than ${MAX_STATE_NAME_CHARS} characters`);
    expect(message).not.toContain('use segments');
  });

  it('refuses a segment that does not start with a letter or digit, or is empty', () => {
    for (const name of ['team/.hidden', 'team/-x', 'team//x', '/team', '']) {
      expect(refusal(name)).toContain('use segments of letters, digits');
    }
  });
});
