import { isDeepStrictEqual } from 'node:util';

/**
 * `expect(actual).toEqual(expected)` for a comparison a spec makes very many
 * times or over big values: jest's matcher costs about a tenth of a
 * millisecond a call and far more on a big value (most of a property spec's
 * time), so a plain deep comparison goes first and jest's runs only to fail
 * with its readable difference.
 */
export function expectAlike<T>(actual: T, expected: T): void {
  if (!isDeepStrictEqual(actual, expected)) expect(actual).toEqual(expected);
}
