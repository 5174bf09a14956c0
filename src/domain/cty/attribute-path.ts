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

export function attr(path: AttributePath, name: string): AttributePath {
  return [...path, { kind: 'attribute', name }];
}

export function key(path: AttributePath, k: string): AttributePath {
  return [...path, { kind: 'key', key: k }];
}

export function index(path: AttributePath, i: number): AttributePath {
  return [...path, { kind: 'index', index: i }];
}
