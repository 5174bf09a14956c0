/** A path into a cty value, as providers report it in diagnostics. */
export type PathStep =
  | { readonly kind: 'attribute'; readonly name: string }
  | { readonly kind: 'key'; readonly key: string }
  | { readonly kind: 'index'; readonly index: number };

export type AttributePath = readonly PathStep[];

/** Renders a path the way Terraform prints it: `versioning_configuration[0].status`. */
export function renderPath(path: AttributePath): string {
  let out = '';
  for (const step of path) {
    switch (step.kind) {
      case 'attribute':
        out += out === '' ? step.name : `.${step.name}`;
        break;
      case 'key':
        out += `[${JSON.stringify(step.key)}]`;
        break;
      case 'index':
        out += `[${step.index}]`;
        break;
      default: {
        const never: never = step;
        throw new Error(`unreachable path step ${JSON.stringify(never)}`);
      }
    }
  }
  return out;
}

export type StatePathStep =
  | { type: 'get_attr'; value: string }
  | { type: 'index'; value: { value: string | number; type: 'string' | 'number' } };

/** The form Terraform writes into `instances[].sensitive_attributes` of a v4 state. */
export function toStatePath(path: AttributePath): StatePathStep[] {
  return path.map((step): StatePathStep => {
    switch (step.kind) {
      case 'attribute':
        return { type: 'get_attr', value: step.name };
      case 'key':
        return { type: 'index', value: { value: step.key, type: 'string' } };
      case 'index':
        return { type: 'index', value: { value: step.index, type: 'number' } };
    }
  });
}

/**
 * Reads a path from `sensitive_attributes` (the inverse of toStatePath). A
 * step of a shape we do not know ends the path there: the prefix read so far
 * covers it, so masking by the result never shows less than was marked.
 */
export function fromStatePath(value: unknown): AttributePath {
  const out: PathStep[] = [];
  if (!Array.isArray(value)) return out;
  for (const step of value as unknown[]) {
    const s = step as { type?: unknown; value?: unknown } | null;
    if (s?.type === 'get_attr' && typeof s.value === 'string') {
      out.push({ kind: 'attribute', name: s.value });
      continue;
    }
    const v = s?.type === 'index' ? (s.value as { value?: unknown; type?: unknown } | null) : null;
    if (v?.type === 'string' && typeof v.value === 'string') {
      out.push({ kind: 'key', key: v.value });
    } else if (v?.type === 'number' && Number.isSafeInteger(v.value)) {
      out.push({ kind: 'index', index: v.value as number });
    } else {
      break;
    }
  }
  return out;
}

export function attr(path: AttributePath, name: string): AttributePath {
  return [...path, { kind: 'attribute', name }];
}

export function key(path: AttributePath, k: string): AttributePath {
  return [...path, { kind: 'key', key: k }];
}

export function index(path: AttributePath, i: number): AttributePath {
  return [...path, { kind: 'index', index: i }];
}
