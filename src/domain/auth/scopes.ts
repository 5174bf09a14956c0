import { DomainError } from '../shared/domain-error';

/** What a token may do. `write` implies `read` of the same states. */
export type Scope =
  | { kind: 'read' | 'write'; glob: string }
  | { kind: 'admin' }
  | { kind: 'query' }
  | { kind: 'events' }
  | { kind: 'metrics' };

export type StateAccess = 'read' | 'write';

export const TOKEN_INVALID = 'TOKEN.INVALID';

// A glob is a state name whose segments may hold `*` and `?`.
const GLOB = /^[A-Za-z0-9*?._@+=/-]{1,512}$/;

/** The scopes that are a word of their own (not about states). */
export type PlainScope = 'admin' | 'query' | 'events' | 'metrics';
const PLAIN: readonly string[] = ['admin', 'query', 'events', 'metrics'] satisfies PlainScope[];

/** A state-name glob as scopes and quotas take it. */
export function isStateGlob(text: string): boolean {
  return GLOB.test(text) && !text.startsWith('/') && !text.endsWith('/');
}

/**
 * `read:GLOB`, `write:GLOB`, `admin`, `query`, `events`, `metrics`. In a GLOB, `*`
 * matches any run of characters, slashes included (`team-a/*` covers
 * `team-a/prod/network`), and `?` one character.
 */
export function parseScope(text: string): Scope {
  const t = text.trim();
  if (PLAIN.includes(t)) return { kind: t as PlainScope };
  const m = /^(read|write):(.*)$/.exec(t);
  if (m && isStateGlob(m[2])) {
    return { kind: m[1] as StateAccess, glob: m[2] };
  }
  throw new DomainError(
    TOKEN_INVALID,
    `"${t.slice(0, 100)}" is not a scope: use read:GLOB, write:GLOB (e.g. write:team-a/*), admin, query, events or metrics`,
  );
}

export function formatScope(scope: Scope): string {
  return scope.kind === 'read' || scope.kind === 'write'
    ? `${scope.kind}:${scope.glob}`
    : scope.kind;
}

/**
 * The glob as a SQL LIKE pattern (escape character `\`). The SQL surface
 * filters rows with these patterns and the API with `globMatches`: both
 * follow this one definition, which is why it is ours and not a glob
 * library's (those keep `*` within a path segment).
 */
export function globToLike(glob: string): string {
  return glob
    .replace(/[\\%_]/g, (c) => `\\${c}`)
    .replace(/\*/g, '%')
    .replace(/\?/g, '_');
}

/**
 * Whether `name` matches `glob` (`*` any run of characters, slashes
 * included; `?` one character), in time linear in their lengths times the
 * wildcards at most: a regular expression of the same glob backtracks
 * through every way of splitting the name among its `*`s, and a scope or a
 * quota rule such as `*a*a*a*a*a*b` took kld's one thread for seconds per
 * request. On a mismatch after a `*`, only the last `*` takes one more
 * character: any earlier one could be moved only to the same effect.
 */
export function globMatches(glob: string, name: string): boolean {
  let g = 0;
  let n = 0;
  // The last `*` seen, and where in `name` its run ends for now.
  let star = -1;
  let runEnd = 0;
  while (n < name.length) {
    const c = glob[g];
    if (c === '*') {
      star = g++;
      runEnd = n;
    } else if (g < glob.length && (c === '?' || c === name[n])) {
      g++;
      n++;
    } else if (star >= 0) {
      g = star + 1;
      n = ++runEnd;
    } else {
      return false;
    }
  }
  while (glob[g] === '*') g++;
  return g === glob.length;
}

/** A token's scopes, asked what they allow. */
export class Grants {
  private constructor(
    readonly scopes: readonly Scope[],
    private readonly everything: boolean,
  ) {}

  static of(scopes: readonly Scope[]): Grants {
    return new Grants(scopes, false);
  }

  /** Authentication off: everything is allowed, as before tokens existed. */
  static all(): Grants {
    return new Grants([], true);
  }

  get unrestricted(): boolean {
    return this.everything;
  }

  has(kind: PlainScope): boolean {
    return this.everything || this.scopes.some((s) => s.kind === kind);
  }

  can(access: StateAccess, state: string): boolean {
    return this.everything || this.globs(access).some((g) => globMatches(g, state));
  }

  /** Whether any state at all may be read (or written). */
  canAny(access: StateAccess): boolean {
    return this.everything || this.globs(access).length > 0;
  }

  /** The globs of the states this token may read (`write` included), or written. */
  globs(access: StateAccess): string[] {
    if (this.everything) return ['*'];
    return this.scopes
      .filter((s) => s.kind === 'write' || (access === 'read' && s.kind === 'read'))
      .map((s) => (s as { glob: string }).glob);
  }
}
