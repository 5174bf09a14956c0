import { DomainError } from '../../domain/shared/domain-error';

const SEGMENT = /^[A-Za-z0-9][A-Za-z0-9._@+=-]*$/;
/** Names key indexes with other columns (provider configs: three 512-byte parts in one entry). */
export const MAX_STATE_NAME_CHARS = 512;

/** `POST /v1/states/<name>/refresh` refreshes <name>, so no state may be named `…/refresh`. */
export const RESERVED_LAST_SEGMENTS: readonly string[] = ['refresh'];

/**
 * Whether a path after `/v1/states/` is `<name>/<action>` rather than a
 * state's name: a name followed by a reserved last segment. Routes match
 * case-insensitively, and so does this.
 */
export function namesAnAction(param: string | string[] | undefined): boolean {
  const segments = Array.isArray(param) ? param : (param ?? '').split('/');
  return (
    segments.length >= 2 &&
    RESERVED_LAST_SEGMENTS.includes(segments[segments.length - 1].toLowerCase())
  );
}

/**
 * State names are path-like (`team/prod/net`). Each segment starts with a
 * letter or digit, so `..` and empty segments never reach the store. The
 * last segment may not be a word reserved for an action on the state.
 */
export function stateNameFrom(param: string | string[] | undefined): string {
  // The router decodes each path segment: a segment holding '/' came as %2F.
  // Joined, `a%2Fb` would name the state `a/b` too; refuse it, so that one
  // state has one URL.
  if (Array.isArray(param) && param.some((segment) => segment.includes('/'))) {
    throw new DomainError(
      'REQUEST.INVALID',
      'invalid state name: an encoded slash (%2F) is not allowed; separate segments with /',
    );
  }
  const name = Array.isArray(param) ? param.join('/') : (param ?? '');
  const problem = stateNameProblem(name);
  if (problem !== null) throw new DomainError('REQUEST.INVALID', `invalid state name ${problem}`);
  return name;
}

/** Why `name` is not a state name, after the words "invalid state name"; null when it is one. */
export function stateNameProblem(name: string): string | null {
  if (name.length > MAX_STATE_NAME_CHARS) {
    return `"${name.slice(0, 100)}…": longer than ${MAX_STATE_NAME_CHARS} characters`;
  }
  const segments = name.split('/');
  if (!name || !segments.every((s) => SEGMENT.test(s))) {
    return `"${name.slice(0, 100)}": use segments of letters, digits and . _ @ + = - separated by /`;
  }
  const last = segments[segments.length - 1];
  // Routes match case-insensitively, so `…/Refresh` would be taken as the action too.
  if (RESERVED_LAST_SEGMENTS.includes(last.toLowerCase())) {
    return `"${name.slice(0, 100)}": a last segment "${last}" is reserved (POST /v1/states/<name>/${last})`;
  }
  return null;
}
