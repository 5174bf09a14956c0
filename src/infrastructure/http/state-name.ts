import { DomainError } from '../../domain/shared/domain-error';

const SEGMENT = /^[A-Za-z0-9][A-Za-z0-9._@+=-]*$/;

/**
 * State names are path-like (`team/prod/net`). Each segment starts with a
 * letter or digit, so `..` and empty segments never reach the store.
 */
export function stateNameFrom(param: string | string[] | undefined): string {
  const name = Array.isArray(param) ? param.join('/') : (param ?? '');
  const segments = name.split('/');
  if (!name || name.length > 512 || !segments.every((s) => SEGMENT.test(s))) {
    throw new DomainError(
      'REQUEST.INVALID',
      `invalid state name "${name.slice(0, 100)}": use segments of letters, digits and . _ @ + = - separated by /`,
    );
  }
  return name;
}
