import * as fs from 'node:fs';
import * as path from 'node:path';
import { Config, ConfigError, loadConfig } from './config';
import { CONFIG_VARIABLES } from './config-file';

/** One row of the README's Configuration table: the names in its first cell, the other two. */
interface Row {
  names: string[];
  defaultCell: string;
  meaning: string;
}

const README = path.join(__dirname, '../../../README.md');

/** The rows of the table under `## Configuration` (the first table there). */
function configurationRows(readme: string): Row[] {
  const section = readme.slice(readme.indexOf('## Configuration'));
  const table = section.slice(0, section.search(/\n\n(?!\|)/));
  return table
    .split('\n')
    .filter((line) => /^\| `KL_/.test(line))
    .map((line) => {
      // A cell never holds an unescaped `|` outside code (`a\|b` in code is escaped).
      const [first, defaultCell, ...rest] = line
        .slice(1, -1)
        .split(/(?<!\\)\|/)
        .map((c) => c.trim());
      return {
        names: [...first.matchAll(/`(KL_[A-Z_]+)`/g)].map((m) => m[1]),
        defaultCell,
        meaning: rest.join('|'),
      };
    });
}

/** What a cell's default stands for: a value in code, or null for "unset". */
function documentedDefault(cell: string): string | null {
  if (/^unset\b/.test(cell)) return null;
  const code = /^`([^`]+)`$/.exec(cell);
  if (!code) throw new Error(`a default the check cannot read: ${cell}`);
  return code[1];
}

/** The bounds a meaning states as "`MIN` to `MAX`" (a parenthesis may follow MIN). */
function documentedRange(meaning: string): { min: string; max: string } | null {
  const m = /`([^`]+)`(?: \([^)]*\))? to `([^`]+)`/.exec(meaning);
  return m ? { min: m[1], max: m[2] } : null;
}

/** The loader, on these variables alone (a periodic refresh needs its states). */
function load(env: Record<string, string>): Config {
  const needs = 'KL_REFRESH_EVERY' in env ? { KL_REFRESH_STATES: 'a' } : {};
  return loadConfig({ ...needs, ...env });
}

function refusal(env: Record<string, string>): string | null {
  try {
    load(env);
    return null;
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return err.message;
  }
}

/** A value just outside a bound: one byte, one unit or one second past it. */
function beyond(bound: string, direction: -1 | 1): string | null {
  const count = /^\d+$/.exec(bound);
  if (count) return Number(bound) + direction < 0 ? null : String(Number(bound) + direction);
  const size = /^(\d+)(KiB|MiB|GiB)$/.exec(bound);
  if (size) {
    const unit = { KiB: 2 ** 10, MiB: 2 ** 20, GiB: 2 ** 30 }[size[2]]!;
    return String(Number(size[1]) * unit + direction);
  }
  const duration = /^(\d+)(s|m|h|d)$/.exec(bound);
  if (duration) {
    const unit = { s: 1, m: 60, h: 3600, d: 86400 }[duration[2]]!;
    return `${Number(duration[1]) * unit + direction}s`;
  }
  throw new Error(`a bound the check cannot step past: ${bound}`);
}

/**
 * The README's Configuration table against the loader: the names, each
 * default, each stated range and each choice. Every check here reads the
 * README as it is, so editing a default or a bound there (or in the loader)
 * alone fails it.
 */
describe('the README Configuration table', () => {
  const rows = configurationRows(fs.readFileSync(README, 'utf8'));
  const byName = new Map(rows.flatMap((row) => row.names.map((name) => [name, row] as const)));

  it('names exactly the variables the loader and a config file take', () => {
    expect(rows.length).toBeGreaterThan(30);
    expect([...byName.keys()].sort()).toEqual(Object.keys(CONFIG_VARIABLES).sort());
  });

  it('states each default as the loader applies it', () => {
    const defaults: Record<string, string> = {};
    for (const [name, row] of byName) {
      const value = documentedDefault(row.defaultCell);
      expect({ name, value }).toEqual({
        name,
        value: CONFIG_VARIABLES[name as keyof typeof CONFIG_VARIABLES],
      });
      if (value !== null) defaults[name] = value;
    }
    // Setting every documented default changes nothing but knowing it was set.
    const { dataDirExplicit: _set, ...given } = loadConfig(defaults);
    const { dataDirExplicit: _unset, ...unset } = loadConfig({});
    expect(given).toEqual(unset);
  });

  it('states the range of every bounded variable, and the loader takes exactly it', () => {
    const bounded = [...byName].filter(([, row]) => documentedRange(row.meaning) !== null);
    expect(bounded.length).toBeGreaterThan(15);
    for (const [name, row] of bounded) {
      const { min, max } = documentedRange(row.meaning)!;
      expect({ name, min, refused: refusal({ [name]: min }) }).toEqual({
        name,
        min,
        refused: null,
      });
      expect({ name, max, refused: refusal({ [name]: max }) }).toEqual({
        name,
        max,
        refused: null,
      });
      for (const outside of [beyond(min, -1), beyond(max, 1)]) {
        if (outside === null) continue;
        expect({ name, outside, refused: refusal({ [name]: outside }) }).toEqual({
          name,
          outside,
          refused: expect.stringContaining(name),
        });
      }
    }
  });

  it('lists every value of a variable that takes one of a few', () => {
    const choices = [...byName].flatMap(([name, row]) => {
      const listed = /expected one of (.*), got/.exec(refusal({ [name]: 'no-such-value' }) ?? '');
      return listed ? [{ name, values: listed[1].split(', '), meaning: row.meaning }] : [];
    });
    expect(choices.map((c) => c.name).sort()).toEqual(
      ['KL_AUTH', 'KL_LOG_FORMAT', 'KL_LOG_LEVEL', 'KL_UNLOGGED_READ_MODELS'].sort(),
    );
    for (const { name, values, meaning } of choices) {
      const undocumented = values.filter((v) => !meaning.includes(`\`${v}\``));
      expect({ name, undocumented }).toEqual({ name, undocumented: [] });
    }
  });
});
