import { DomainError } from '../shared/domain-error';

/**
 * The root module's HCL as kl needs it: top-level blocks (and each attribute
 * of a `locals` block) with their text ranges and the references their
 * expressions make. The infrastructure's HCL reader fills it; scoping is
 * decided here, purely.
 */
export type HclUnitKind =
  | 'resource'
  | 'data'
  | 'module'
  | 'variable'
  | 'output'
  | 'local'
  | 'provider'
  | 'terraform'
  | 'moved'
  | 'import'
  | 'removed'
  | 'check'
  | 'other';

export interface HclRange {
  start: number;
  end: number;
}

export interface HclUnit {
  kind: HclUnitKind;
  /**
   * How references name it: `type.name`, `data.type.name`, `module.name`,
   * `var.name`, `local.name`, `output.name`, `provider.<local name>`; '' for
   * blocks nothing refers to.
   */
  key: string;
  range: HclRange;
  /** Traversals its expressions make, as written: `var.x`, `aws_vpc.main.id`, `module.net`. */
  references: string[];
  /** Nested ranges left out when the unit is copied (`backend` and `cloud` in `terraform`). */
  cut: HclRange[];
  /** For a local: the `locals` block it came from, so siblings are copied together. */
  block?: number;
}

export interface HclFile {
  /** File name relative to the configuration directory. */
  name: string;
  text: string;
  units: HclUnit[];
}

export interface ScopedFile {
  name: string;
  text: string;
}

export interface ScopedConfiguration {
  files: ScopedFile[];
  /** Root resources and module calls the scoped configuration declares. */
  footprint: string[];
}

export const SCOPE_INVALID = 'PLAN.SCOPE_INVALID';

const IGNORED_ROOTS = new Set(['count', 'each', 'path', 'terraform', 'self']);

/** The text of `range` with `cut` ranges (inside it) left out. */
function textOf(text: string, range: HclRange, cut: readonly HclRange[]): string {
  let out = '';
  let at = range.start;
  for (const c of [...cut].sort((a, b) => a.start - b.start)) {
    if (c.start < at || c.end > range.end) continue;
    out += text.slice(at, c.start);
    at = c.end;
  }
  return out + text.slice(at, range.end);
}

/** A whole file without its `backend`/`cloud` blocks: how kl copies unscoped HCL. */
export function withoutBackend(file: HclFile): string {
  const cuts = file.units.flatMap((u) => u.cut);
  return textOf(file.text, { start: 0, end: file.text.length }, cuts);
}

/** The unit keys a reference may name, most specific first. */
function candidateKeys(ref: string): string[] {
  const parts = ref.split('.').map((p) => p.replace(/\[.*$/, ''));
  const root = parts[0];
  if (IGNORED_ROOTS.has(root) || parts.length < 2)
    return parts.length === 1 ? [`provider.${root}`] : [];
  switch (root) {
    case 'var':
    case 'local':
    case 'module':
      return [`${root}.${parts[1]}`];
    case 'data':
      return parts.length >= 3 ? [`data.${parts[1]}.${parts[2]}`] : [];
    default:
      // `aws_vpc.main` is a resource; `aws.west` a provider configuration.
      return [`${root}.${parts[1]}`, `provider.${root}`];
  }
}

function impliedProvider(unit: HclUnit): string | null {
  if (unit.kind !== 'resource' && unit.kind !== 'data') return null;
  const type = unit.key.replace(/^data\./, '').split('.')[0];
  return `provider.${type.split('_')[0]}`;
}

/**
 * Narrows a root module to `selected` files plus what they need: the
 * variables, locals, providers, data sources, resources and module calls
 * they reference (transitively), every `terraform` block (without its
 * backend), and from the other files the outputs and `moved`/`import`/
 * `removed` blocks that refer to something the selected files declare
 * (so outputs stay in step with what the apply changes). Override files are
 * left out unless selected: they would amend blocks that may not be there.
 */
export function scopeConfiguration(
  files: readonly HclFile[],
  selected: readonly string[],
): ScopedConfiguration {
  const names = new Set(files.map((f) => f.name));
  for (const s of selected) {
    if (!names.has(s)) {
      throw new DomainError(
        SCOPE_INVALID,
        `-f ${s}: no such .tf file in the configuration directory`,
      );
    }
  }
  const chosen = new Set(selected);
  const isOverride = (name: string) => /(^|_)override\.tf$/.test(name);

  const byKey = new Map<string, HclUnit[]>();
  const fileOf = new Map<HclUnit, HclFile>();
  for (const f of files) {
    if (isOverride(f.name) && !chosen.has(f.name)) continue;
    for (const u of f.units) {
      fileOf.set(u, f);
      if (u.key === '') continue;
      const list = byKey.get(u.key) ?? [];
      list.push(u);
      byKey.set(u.key, list);
    }
  }
  const providers = [...byKey.entries()].filter(([k]) => k.startsWith('provider.'));

  const targets = (u: HclUnit): HclUnit[] => {
    const out: HclUnit[] = [];
    for (const ref of u.references) {
      for (const key of candidateKeys(ref)) {
        const found = byKey.get(key);
        if (found) {
          out.push(...found);
          break;
        }
      }
    }
    const implied = impliedProvider(u);
    if (implied) out.push(...(byKey.get(implied) ?? []));
    // A module inherits the default provider configurations: keep them all.
    if (u.kind === 'module') for (const [, list] of providers) out.push(...list);
    return out;
  };

  const kept = new Set<HclUnit>();
  const keep = (start: Iterable<HclUnit>) => {
    const queue = [...start];
    while (queue.length > 0) {
      const u = queue.pop()!;
      if (kept.has(u)) continue;
      kept.add(u);
      queue.push(...targets(u));
    }
  };
  keep([...fileOf.keys()].filter((u) => chosen.has(fileOf.get(u)!.name) || u.kind === 'terraform'));

  // Declarations of the selected files that outputs and moves elsewhere may follow.
  const declared = new Set(
    [...fileOf.keys()].filter(
      (u) =>
        chosen.has(fileOf.get(u)!.name) &&
        (u.kind === 'resource' || u.kind === 'data' || u.kind === 'module'),
    ),
  );
  const followers = [...fileOf.keys()].filter(
    (u) =>
      !chosen.has(fileOf.get(u)!.name) &&
      (u.kind === 'output' || u.kind === 'moved' || u.kind === 'import' || u.kind === 'removed'),
  );
  keep(followers.filter((u) => targets(u).some((t) => declared.has(t))));

  const out: ScopedFile[] = [];
  for (const f of files) {
    if (chosen.has(f.name)) {
      out.push({ name: f.name, text: withoutBackend(f) });
      continue;
    }
    const parts: string[] = [];
    let openLocals: number | undefined;
    for (const u of f.units) {
      if (!kept.has(u)) continue;
      if (u.kind === 'local') {
        if (openLocals !== u.block) {
          if (openLocals !== undefined) parts.push('}');
          parts.push('locals {');
          openLocals = u.block;
        }
        parts.push(`  ${textOf(f.text, u.range, u.cut)}`);
        continue;
      }
      if (openLocals !== undefined) {
        parts.push('}');
        openLocals = undefined;
      }
      parts.push(textOf(f.text, u.range, u.cut));
    }
    if (openLocals !== undefined) parts.push('}');
    if (parts.length === 0) continue;
    out.push({
      name: f.name,
      text: `# kl: only what the scoped files need, copied from ${f.name}\n${parts.join('\n')}\n`,
    });
  }

  const footprint = [...kept]
    .filter((u) => u.kind === 'resource' || u.kind === 'data' || u.kind === 'module')
    .map((u) => u.key);
  return { files: out, footprint: [...new Set(footprint)].sort() };
}

/**
 * A `.tf.json` file without `terraform.backend`/`terraform.cloud` (the
 * `terraform` member may be an object or a list of them); unchanged text
 * when there is none.
 */
export function jsonWithoutBackend(name: string, text: string): string {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new DomainError(SCOPE_INVALID, `${name} is not valid JSON: ${(e as Error).message}`);
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) return text;
  const tf = (doc as Record<string, unknown>).terraform;
  let changed = false;
  for (const block of Array.isArray(tf) ? tf : [tf]) {
    if (typeof block !== 'object' || block === null) continue;
    for (const k of ['backend', 'cloud']) {
      if (k in block) {
        delete (block as Record<string, unknown>)[k];
        changed = true;
      }
    }
  }
  return changed ? JSON.stringify(doc, null, 2) + '\n' : text;
}
