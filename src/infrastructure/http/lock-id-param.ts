import { DomainError } from '../../domain/shared/domain-error';

/** A lock id from the query string: given once, or not at all ('' counts as not at all). */
export function lockIdFrom(value: unknown, param: string): string | null {
  if (value === undefined || value === '') return null;
  if (typeof value !== 'string') {
    throw new DomainError('REQUEST.INVALID', `${param} must be given once, as a string`);
  }
  return value;
}
