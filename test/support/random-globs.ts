import { formatIndexKey } from '../../src/domain/terraform/instance-address';
import { random } from './seeded-random';

/**
 * Glob and address texts drawn from a small vocabulary, so that they meet
 * often: `*`, open module globs, keyed and unkeyed steps, data sources, 1
 * beside "1", quoted keys holding dots, brackets and a star.
 */
const KEYS: (number | string)[] = [0, 1, '1', 'k', 'x.y', 'a[1].b', '*'];
const MODULES = ['a', 'b'];
const TYPES = ['aws_x', 'aws_y'];
const NAMES = ['m', 'n'];

/** xorshift's first draws from a small seed are small too: the seed is spread first. */
export function rng(seed: number): () => number {
  return random(Math.imul(seed, 0x9e3779b1) >>> 0);
}

export function pick<T>(r: () => number, from: readonly T[]): T {
  return from[Math.floor(r() * from.length)];
}

function key(r: () => number, keyless: number): string {
  return r() < keyless ? '' : formatIndexKey(pick(r, KEYS));
}

function modulePath(r: () => number, keyless: number): string {
  const depth = Math.floor(r() * 3);
  let path = '';
  for (let i = 0; i < depth; i++) path += `module.${pick(r, MODULES)}${key(r, keyless)}.`;
  return path;
}

function resource(r: () => number, keyless: number): string {
  return `${r() < 0.3 ? 'data.' : ''}${pick(r, TYPES)}.${pick(r, NAMES)}${key(r, keyless)}`;
}

export function randomGlob(r: () => number): string {
  const shape = r();
  if (shape < 0.05) return '*';
  const path = modulePath(r, 0.4);
  if (shape < 0.3 && path !== '') return `${path}*`;
  return `${path}${resource(r, 0.4)}`;
}

export function randomAddress(r: () => number): string {
  return `${modulePath(r, 0.3)}${resource(r, 0.3)}`;
}
