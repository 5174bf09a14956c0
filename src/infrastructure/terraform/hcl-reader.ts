import { readFileSync } from 'node:fs';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import * as v8 from 'node:v8';
import type { Language, Node, Parser } from 'web-tree-sitter';
import { ConfigReader, ModuleSource } from '../../application/apply/terraform-workspace.port';
import { HclFile, HclRange, HclUnit, HclUnitKind } from '../../domain/apply/config-scope';
import { DomainError } from '../../domain/shared/domain-error';
import { defaultCacheDir } from '../provider/file-provider-schema-cache';
import { FileHclUnitsCache, HclUnitsCache, identityOf } from './hcl-units-cache';

export const CONFIG_INVALID = 'PLAN.CONFIG_INVALID';

/**
 * Reads a module directory's HCL with tree-sitter's Terraform grammar
 * (web-tree-sitter runs it as WebAssembly: no native build). It is a
 * concrete syntax tree with exact source ranges, which is what scoping needs
 * to copy blocks verbatim; the JSON-producing HCL converters on npm lose the
 * ranges, and terraform itself offers no parser of its own to call.
 */

interface Grammar {
  Parser: typeof Parser;
  language: Language;
}

let grammar: Promise<Grammar> | null = null;

const GRAMMAR_WASM = '@tree-sitter-grammars/tree-sitter-hcl/tree-sitter-terraform.wasm';

/**
 * V8 recompiles a WebAssembly function with its optimising compiler once it
 * has run a while; the grammar's lexer is one huge function, so reading a
 * configuration of a few files spent ~150 ms of CPU (most of a second of
 * wall time on a busy machine) compiling it, more than the parse itself. A
 * higher budget leaves small reads on the baseline code; a big configuration
 * still gets the optimised lexer. The grammar is the only WebAssembly kl runs.
 */
const WASM_TIERING_BUDGET = '--wasm-tiering-budget=100000000';

/** Loaded on the first parse only: a configuration read wholly from the cache needs none of it. */
function terraformGrammar(): Promise<Grammar> {
  grammar ??= (async () => {
    v8.setFlagsFromString(WASM_TIERING_BUDGET);
    const { Parser, Language } = await import('web-tree-sitter');
    await Parser.init();
    const language = await Language.load(await fs.readFile(require.resolve(GRAMMAR_WASM)));
    return { Parser, language };
  })();
  return grammar;
}

let identity: string | null = null;

/**
 * What turns a file's text into units: this module, the tree-sitter runtime
 * (its JavaScript and WebAssembly) and the grammar, by content. A cache
 * entry made by any other combination has another name.
 */
function readerIdentity(): string {
  identity ??= identityOf(
    [
      __filename,
      require.resolve('web-tree-sitter'),
      require.resolve('web-tree-sitter/tree-sitter.wasm'),
      require.resolve(GRAMMAR_WASM),
    ],
    (f) => readFileSync(f),
  );
  return identity;
}

/** The units cache kl's commands use: in kl's cache directory (`KL_CACHE_DIR`, …). */
export function defaultHclUnitsCache(): HclUnitsCache {
  return new FileHclUnitsCache(defaultCacheDir(), readerIdentity);
}

const KINDS: Record<string, HclUnitKind> = {
  resource: 'resource',
  data: 'data',
  module: 'module',
  variable: 'variable',
  output: 'output',
  provider: 'provider',
  terraform: 'terraform',
  moved: 'moved',
  import: 'import',
  removed: 'removed',
  check: 'check',
};

const range = (n: Node): HclRange => ({ start: n.startIndex, end: n.endIndex });

function named(n: Node): Node[] {
  return n.namedChildren.filter((c): c is Node => c !== null);
}

/** `var.x`, `aws_vpc.main.id`, `module.net` — every traversal that starts at a variable. */
function references(n: Node): string[] {
  const out: string[] = [];
  for (const v of n.descendantsOfType('variable_expr')) {
    if (!v) continue;
    let ref = v.text;
    for (let s = v.nextNamedSibling; s && s.type === 'get_attr'; s = s.nextNamedSibling) {
      const id = named(s).find((c) => c.type === 'identifier');
      if (!id) break;
      ref += `.${id.text}`;
    }
    out.push(ref);
  }
  return out;
}

function label(n: Node): string {
  return n.type === 'string_lit' ? n.text.slice(1, -1) : n.text;
}

function unitsOf(body: Node): HclUnit[] {
  const units: HclUnit[] = [];
  let localsBlock = 0;
  for (const child of named(body)) {
    if (child.type !== 'block') continue;
    const parts = named(child);
    const type = parts[0]?.text ?? '';
    const labels = parts
      .slice(1)
      .filter((p) => p.type === 'string_lit' || p.type === 'identifier')
      .map(label);
    const inner = parts.find((p) => p.type === 'body');
    if (type === 'locals') {
      localsBlock++;
      for (const attr of inner ? named(inner) : []) {
        if (attr.type !== 'attribute') continue;
        const name = named(attr)[0]?.text ?? '';
        units.push({
          kind: 'local',
          key: `local.${name}`,
          range: range(attr),
          references: references(attr),
          cut: [],
          block: localsBlock,
        });
      }
      continue;
    }
    const kind = KINDS[type] ?? 'other';
    const key =
      kind === 'resource' && labels.length >= 2
        ? `${labels[0]}.${labels[1]}`
        : kind === 'data' && labels.length >= 2
          ? `data.${labels[0]}.${labels[1]}`
          : kind === 'module' && labels[0]
            ? `module.${labels[0]}`
            : kind === 'variable' && labels[0]
              ? `var.${labels[0]}`
              : kind === 'output' && labels[0]
                ? `output.${labels[0]}`
                : kind === 'provider' && labels[0]
                  ? `provider.${labels[0]}`
                  : '';
    const cut =
      kind === 'terraform' && inner
        ? named(inner)
            .filter(
              (b) => b.type === 'block' && ['backend', 'cloud'].includes(named(b)[0]?.text ?? ''),
            )
            .map(range)
        : [];
    units.push({ kind, key, range: range(child), references: references(child), cut });
  }
  return units;
}

function firstError(n: Node): Node | null {
  if (n.isError || n.isMissing) return n;
  for (const c of n.children) {
    if (c && c.hasError) return firstError(c) ?? c;
    if (c && (c.isError || c.isMissing)) return c;
  }
  return null;
}

/** Parses one file's text. */
export async function parseHcl(name: string, text: string): Promise<HclFile> {
  const { Parser, language } = await terraformGrammar();
  const parser = new Parser();
  try {
    parser.setLanguage(language);
    const tree = parser.parse(text);
    if (!tree) throw new DomainError(CONFIG_INVALID, `${name}: cannot be parsed`);
    try {
      const root = tree.rootNode;
      if (root.hasError) {
        const at = firstError(root) ?? root;
        throw new DomainError(
          CONFIG_INVALID,
          `${name}:${at.startPosition.row + 1}: not valid HCL near ${JSON.stringify(at.text.slice(0, 40))}`,
        );
      }
      const body = named(root).find((c) => c.type === 'body');
      return { name, text, units: body ? unitsOf(body) : [] };
    } finally {
      tree.delete();
    }
  } finally {
    parser.delete();
  }
}

/**
 * `ConfigReader` over the file system. With a cache, a file whose exact text
 * was read before is not parsed again (see `HclUnitsCache`).
 */
export class HclConfigReader implements ConfigReader {
  /** Cache entries still being written. */
  private readonly writing = new Set<Promise<void>>();

  constructor(private readonly cache: HclUnitsCache | null = null) {}

  /**
   * Resolves once every cache entry a read made is written. A read does not
   * wait for its entries (a directory, a file and a rename: a few ms on the
   * way to `terraform plan`'s start); the caller awaits this before it exits.
   */
  async settled(): Promise<void> {
    while (this.writing.size > 0) await Promise.all(this.writing);
  }

  async readModule(dir: string): Promise<ModuleSource> {
    let entries: string[];
    try {
      entries = (await fs.readdir(dir, { withFileTypes: true }))
        .filter((e) => e.isFile())
        .map((e) => e.name)
        .sort();
    } catch (e) {
      throw new DomainError(
        CONFIG_INVALID,
        `cannot read the configuration directory ${dir}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
      );
    }
    // Read (and looked up) side by side; parsed in name order, so the first bad file is named.
    const read = async (names: string[]) => {
      const settled = await Promise.allSettled(
        names.map((n) => fs.readFile(path.join(dir, n), 'utf8')),
      );
      return settled.map((r) => {
        if (r.status === 'rejected') throw r.reason;
        return r.value;
      });
    };
    const tfNames = entries.filter((n) => n.endsWith('.tf'));
    const jsonNames = entries.filter((n) => n.endsWith('.tf.json'));
    const [texts, jsonTexts] = await Promise.all([read(tfNames), read(jsonNames)]);
    const cached = await Promise.all(texts.map((t) => this.cache?.get(t) ?? null));
    const hcl: HclFile[] = [];
    for (const [i, name] of tfNames.entries()) {
      const units = cached[i];
      if (units) {
        hcl.push({ name, text: texts[i], units });
        continue;
      }
      const file = await parseHcl(name, texts[i]);
      if (this.cache) this.remember(this.cache, texts[i], file.units);
      hcl.push(file);
    }
    const json = jsonNames.map((n, i) => [n, jsonTexts[i]] as [string, string]);
    return { hcl, json: new Map(json) };
  }

  private remember(cache: HclUnitsCache, text: string, units: HclUnit[]): void {
    // Like every cache failure, a failed write is only a later miss.
    const write: Promise<void> = cache
      .put(text, units)
      .catch(() => undefined)
      .finally(() => this.writing.delete(write));
    this.writing.add(write);
  }
}
