import { DomainError } from '../../domain/shared/domain-error';
import { isBigNumber } from '../../domain/terraform/lossless-json';

/** What a field of kld's answer must hold; `?` also allows null or no field. */
type Kind = 'string' | 'number' | 'object' | 'list' | 'strings';
export type Fields = Record<string, Kind | `${Kind}?`>;

const NAMED: Record<Kind, string> = {
  string: 'a string',
  number: 'a number',
  object: 'an object',
  list: 'a list',
  strings: 'a list of strings',
};

function holds(kind: Kind, value: unknown): boolean {
  switch (kind) {
    case 'string':
      return typeof value === 'string';
    case 'number':
      return typeof value === 'number' || isBigNumber(value);
    case 'object':
      return typeof value === 'object' && value !== null && !Array.isArray(value);
    case 'list':
      return Array.isArray(value);
    case 'strings':
      return Array.isArray(value) && value.every((v) => typeof v === 'string');
  }
}

/**
 * `value` (an object of kld's answer to `request`, found at `at`) holds the
 * fields kl reads in the types it reads them as; otherwise one line naming the
 * request and the field, instead of a TypeError where kl first uses it. Only
 * the fields kl relies on are named, so a newer kld may add or widen others.
 */
export function checkFields(value: unknown, fields: Fields, request: string, at = ''): void {
  const wrong = mismatch(value, specsOf(fields));
  if (wrong !== null) throw unexpected(request, at, wrong);
}

/** checkFields on each item of `list`, named `key[i]`. */
export function checkEachFields(
  list: readonly unknown[],
  fields: Fields,
  request: string,
  key: string,
): void {
  const specs = specsOf(fields);
  for (let i = 0; i < list.length; i++) {
    const wrong = mismatch(list[i], specs);
    if (wrong !== null) throw unexpected(request, `${key}[${i}]`, wrong);
  }
}

interface Spec {
  name: string;
  kind: Kind;
  optional: boolean;
}

/** Read once per answer, not once per row (answers of 20k rows). */
function specsOf(fields: Fields): Spec[] {
  return Object.entries(fields).map(([name, spec]) => {
    const optional = spec.endsWith('?');
    return { name, optional, kind: (optional ? spec.slice(0, -1) : spec) as Kind };
  });
}

/** The first field of another kind, as "name is not …", or null. */
function mismatch(value: unknown, specs: readonly Spec[]): string | null {
  const object = (typeof value === 'object' && value !== null ? value : {}) as Record<
    string,
    unknown
  >;
  for (const { name, kind, optional } of specs) {
    const field = object[name];
    if ((optional && (field === null || field === undefined)) || holds(kind, field)) continue;
    return `${name} is not ${NAMED[kind]}${optional ? ' or null' : ''}`;
  }
  return null;
}

function unexpected(request: string, at: string, wrong: string): DomainError {
  return new DomainError(
    'SERVER.UNEXPECTED_ANSWER',
    `kld's answer to ${request.split('?')[0]}: ${at ? `${at}.` : ''}${wrong} (is --server a kld of this version?)`,
  );
}
