import type {
  InstanceObjectV4,
  JsonObject,
  OutputV4,
  ResourceV4,
  StateDocumentV4,
} from '../../src/domain/terraform';

/**
 * A synthetic terraform v4 state shaped like what terraform 1.11 writes for
 * the `terraform_data` fan-out config of the shared notes (section 3): a
 * leader, `x[count]` depending on it, a `sink` depending on both, the same
 * `x` in two module instances, and outputs. Member order, key order and
 * formatting follow terraform's writer, so the text is what `terraform state
 * pull` would print for such a state.
 *
 * The text is kept as one pre-rendered fragment per instance, so a delta
 * (one instance changed, serial + 1) costs one fragment and a join rather
 * than serialising the whole document again: the bench's client work stays
 * small next to what it measures.
 */
/** A state with no resources: the small OTHER state benches write beside a big one. */
export const SMALL_STATE = {
  version: 4,
  terraform_version: '1.11.4',
  serial: 1,
  lineage: 'bench-small',
  outputs: {},
  resources: [],
};

export interface StateGeneratorOptions {
  /** Instances in total, leader and sink included (at least 3). */
  instances: number;
  /** Share of the `x` instances that live in the module instances. */
  moduleShare?: number;
  lineage?: string;
  serial?: number;
  /** Seed for the instance ids, so two runs generate the same state. */
  seed?: number;
}

const PROVIDER = 'provider["terraform.io/builtin/terraform"]';
const MODULES = ['module.shard["a"]', 'module.shard["b"]'];
const LEADER = 'terraform_data.leader';
const ITEM_TYPE = ['object', { blob: 'string', idx: 'number', leader: 'string' }];

interface ResourcePart {
  resource: ResourceV4;
  /** Rendered instance objects, already indented for their depth. */
  texts: string[];
}

export class SyntheticState {
  readonly lineage: string;
  serial: number;
  private readonly parts: ResourcePart[];
  private readonly outputs: Record<string, OutputV4>;
  /** (part, instance) of every `x` instance, the ones a delta may change. */
  private readonly items: [number, number][] = [];
  private revision = 0;

  constructor(options: StateGeneratorOptions) {
    const total = Math.floor(options.instances);
    if (!(total >= 3)) throw new Error(`instances must be at least 3, got ${options.instances}`);
    const random = xorshift(options.seed ?? 0x5eed);
    this.lineage = options.lineage ?? uuid(random);
    this.serial = options.serial ?? 1;
    const xs = total - 2;
    const inModules = Math.floor(xs * (options.moduleShare ?? 0.25));
    const perModule = MODULES.map(
      (_, i) => Math.floor(inModules / MODULES.length) + (i < inModules % MODULES.length ? 1 : 0),
    );
    const rootXs = xs - inModules;
    const leaderValue = 'leader-v1';

    const leader = instance(undefined, uuid(random), str(leaderValue), []);
    const sink = instance(undefined, uuid(random), num(xs), [LEADER, 'terraform_data.x']);
    const resources: ResourceV4[] = [
      resource(undefined, 'leader', [leader]),
      resource(undefined, 'sink', [sink]),
      resource(
        undefined,
        'x',
        range(rootXs, (i) => instance(i, uuid(random), item(i, leaderValue, 0), [LEADER])),
      ),
      ...MODULES.map((module, m) =>
        resource(
          module,
          'x',
          range(perModule[m], (i) => instance(i, uuid(random), item(i, leaderValue, 0), [LEADER])),
        ),
      ),
    ].filter((r) => r.instances.length > 0);

    this.parts = resources.map((r) => ({
      resource: r,
      texts: r.instances.map((o) => indented(o, 4)),
    }));
    this.parts.forEach((p, pi) => {
      if (p.resource.name === 'x') p.texts.forEach((_, ii) => this.items.push([pi, ii]));
    });
    this.outputs = {
      leader: { value: leaderValue, type: 'string' },
      sink: { value: xs, type: 'number' },
    };
  }

  get instanceCount(): number {
    return this.parts.reduce((n, p) => n + p.texts.length, 0);
  }

  /**
   * The next version: instance `which` (modulo the number of `x` instances)
   * gets a new input/output, as `terraform apply` of an in-place update
   * would write it, and the serial goes up by one.
   */
  changeOne(which: number): void {
    const [pi, ii] =
      this.items[((which % this.items.length) + this.items.length) % this.items.length];
    const part = this.parts[pi];
    const current = part.resource.instances[ii];
    const idx = current.index_key as number;
    const attributes = current.attributes as JsonObject;
    const next = instance(
      idx,
      attributes.id as string,
      item(idx, 'leader-v1', ++this.revision),
      current.dependencies ?? [],
    );
    part.resource.instances[ii] = next;
    part.texts[ii] = indented(next, 4);
    this.serial += 1;
  }

  /** The document as an object (shares structure with the generator: read only). */
  document(): StateDocumentV4 {
    return {
      version: 4,
      terraform_version: '1.11.4',
      serial: this.serial,
      lineage: this.lineage,
      outputs: this.outputs,
      resources: this.parts.map((p) => p.resource),
      check_results: null,
    };
  }

  /** Exactly `JSON.stringify(this.document(), null, 2) + '\n'`, built from the fragments. */
  text(): string {
    const resources = this.parts.map((p) => {
      const r = p.resource;
      const head = [
        ...(r.module === undefined ? [] : [`      "module": ${JSON.stringify(r.module)},\n`]),
        `      "mode": ${JSON.stringify(r.mode)},\n`,
        `      "type": ${JSON.stringify(r.type)},\n`,
        `      "name": ${JSON.stringify(r.name)},\n`,
        `      "provider": ${JSON.stringify(r.provider)},\n`,
      ].join('');
      return `    {\n${head}      "instances": [\n        ${p.texts.join(',\n        ')}\n      ]\n    }`;
    });
    return (
      '{\n' +
      `  "version": 4,\n` +
      `  "terraform_version": "1.11.4",\n` +
      `  "serial": ${this.serial},\n` +
      `  "lineage": ${JSON.stringify(this.lineage)},\n` +
      `  "outputs": ${indented(this.outputs, 1)},\n` +
      `  "resources": [\n${resources.join(',\n')}\n  ],\n` +
      `  "check_results": null\n}\n`
    );
  }
}

function resource(module: string | undefined, name: string, instances: InstanceObjectV4[]) {
  const r: ResourceV4 = {
    ...(module === undefined ? {} : { module }),
    mode: 'managed',
    type: 'terraform_data',
    name,
    provider: PROVIDER,
    instances,
  };
  return r;
}

/** Members in terraform's order (instanceObjectStateV4); attribute keys sorted, as cty writes them. */
function instance(
  key: number | undefined,
  id: string,
  input: JsonObject,
  dependencies: string[],
): InstanceObjectV4 {
  return {
    ...(key === undefined ? {} : { index_key: key }),
    schema_version: 0,
    attributes: { id, input, output: input, triggers_replace: null },
    sensitive_attributes: [],
    ...(dependencies.length ? { dependencies } : {}),
  };
}

/** `terraform_data.input` is dynamically typed, so state stores value and type. */
function item(idx: number, leader: string, revision: number): JsonObject {
  const tag = revision === 0 ? '' : `r${revision}-`;
  return {
    value: { blob: `payload-${idx}-${tag}abcdefghijklmnopqrstuvwxyz0123456789`, idx, leader },
    type: ITEM_TYPE,
  };
}

const str = (value: string): JsonObject => ({ value, type: 'string' });
const num = (value: number): JsonObject => ({ value, type: 'number' });

function range<T>(n: number, f: (i: number) => T): T[] {
  return Array.from({ length: n }, (_, i) => f(i));
}

/** JSON.stringify(value, null, 2) as it appears nested `depth` levels deep. */
function indented(value: unknown, depth: number): string {
  return JSON.stringify(value, null, 2).replace(/\n/g, `\n${'  '.repeat(depth)}`);
}

function xorshift(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s;
  };
}

/** Looks like the ids terraform_data gets (8-4-4-4-12 hex). */
function uuid(random: () => number): string {
  const hex = [random(), random(), random(), random()]
    .map((n) => n.toString(16).padStart(8, '0'))
    .join('');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}
