import { DomainError } from '../shared/domain-error';
import { globMatches, globToLike, Grants, parseScope } from './scopes';

describe('scopes', () => {
  it('parses the six kinds and refuses anything else', () => {
    expect(parseScope('read:team-a/*')).toEqual({ kind: 'read', glob: 'team-a/*' });
    expect(parseScope('write:x')).toEqual({ kind: 'write', glob: 'x' });
    expect(parseScope('admin')).toEqual({ kind: 'admin' });
    expect(parseScope('metrics')).toEqual({ kind: 'metrics' });
    for (const bad of [
      'read',
      'read:',
      'metric',
      'metrics:x',
      'write:a b',
      'owner',
      'read:/x',
      "read:x';--",
      'read:%',
    ]) {
      expect(() => parseScope(bad)).toThrow(DomainError);
    }
  });

  it('globs: * crosses slashes, ? is one character, the rest is literal', () => {
    expect(globMatches('team-a/*', 'team-a/prod/network')).toBe(true);
    expect(globMatches('team-a/*', 'team-b/x')).toBe(false);
    expect(globMatches('team-a/*', 'team-ab/x')).toBe(false);
    expect(globMatches('a.b', 'aXb')).toBe(false);
    expect(globMatches('a?c', 'abc')).toBe(true);
    expect(globMatches('*', 'anything/at/all')).toBe(true);
  });

  it('globs: the same answers as a regular expression of the glob, over many globs and names', () => {
    const asRegExp = (glob: string) =>
      new RegExp(
        `^${glob
          .split('')
          .map((c) =>
            c === '*' ? '[\\s\\S]*' : c === '?' ? '[\\s\\S]' : c.replace(/[.+/-]/g, '\\$&'),
          )
          .join('')}$`,
      );
    // Every glob of up to five characters over a small alphabet, against
    // every name of up to five: all the ways `*` and `?` meet letters.
    const globAlphabet = ['a', 'b', '/', '*', '?'];
    const nameAlphabet = ['a', 'b', '/'];
    const words = (alphabet: string[], max: number): string[] => {
      const all = [''];
      for (let i = 0; all[i] !== undefined && all[i].length < max; i++) {
        for (const c of alphabet) all.push(all[i] + c);
      }
      return all;
    };
    const names = words(nameAlphabet, 5);
    const differ: string[] = [];
    let compared = 0;
    for (const glob of words(globAlphabet, 5)) {
      const re = asRegExp(glob);
      for (const name of names) {
        if (globMatches(glob, name) !== re.test(name)) differ.push(`${glob} ~ ${name}`);
        compared++;
      }
    }
    expect(differ).toEqual([]);
    expect(compared).toBe(3906 * 364);
  });

  it('globs: many wildcards against a long name that misses answer at once', () => {
    // A regular expression took about 10 s for the first (and the API asks per request).
    expect(globMatches('*a'.repeat(5) + '*b', 'a'.repeat(100))).toBe(false);
    expect(globMatches('*a'.repeat(200) + '*', 'a'.repeat(512))).toBe(true);
    expect(globMatches('?'.repeat(511) + '*', 'a'.repeat(512))).toBe(true);
  });

  it('the LIKE pattern escapes what LIKE would read as wildcards', () => {
    expect(globToLike('team_a/*')).toBe('team\\_a/%');
    expect(globToLike('a?')).toBe('a_');
  });

  it('write implies read; read never implies write; kinds are separate', () => {
    const g = Grants.of([parseScope('write:team-a/*'), parseScope('read:shared/*')]);
    expect(g.can('read', 'team-a/x')).toBe(true);
    expect(g.can('write', 'team-a/x')).toBe(true);
    expect(g.can('read', 'shared/net')).toBe(true);
    expect(g.can('write', 'shared/net')).toBe(false);
    expect(g.can('read', 'team-b/x')).toBe(false);
    expect(g.has('admin')).toBe(false);
    expect(g.has('metrics')).toBe(false);
    expect(Grants.of([parseScope('metrics')]).has('metrics')).toBe(true);
    expect(Grants.of([parseScope('admin')]).has('metrics')).toBe(false);
    expect(g.globs('read')).toEqual(['team-a/*', 'shared/*']);
    expect(Grants.all().can('write', 'x')).toBe(true);
  });
});
