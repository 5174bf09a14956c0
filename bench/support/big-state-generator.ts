import { createHash } from 'node:crypto';
import type {
  InstanceObjectV4,
  JsonObject,
  JsonValue,
  ResourceV4,
  StateDocumentV4,
} from '../../src/domain/terraform';

/**
 * A synthetic terraform v4 state of `examples/big-state` at `size`, without
 * running terraform: what terraform 1.11 writes after
 * `terraform apply -var=size=<size>` there, byte for byte except the
 * `terraform_data` ids (random in terraform, seeded here), lineage and serial.
 *
 *   terraform_data.deployment_name → deployment_id → deployment_marker   (root chain)
 *   module.primary_herd: terraform_data.leader, tag[size], label[size]   (fan-out from the leader)
 *   module.shadow_herd:  the same module at size 1, seeded from the primary leader
 *   terraform_data.summary                                               (reads both herds)
 *
 * so `2 × size + 8` instances: 4 in the root module, `2 × size + 1` in the
 * primary herd, 3 in the shadow herd (checked against terraform 1.11.4 at
 * size 2: 12 instances). Input values are computed the way the HCL computes
 * them (`substr(sha256(…), 0, n)`), and `dependencies` are what terraform
 * records: every resource the instance depends on, transitively, sorted. The
 * dependency edges are therefore linear in `size`: 3 per herd member.
 */
export interface BigStateOptions {
  /** `var.size`: (tag, label) pairs in the primary herd. */
  size: number;
  /** `var.deployment`. */
  deployment?: string;
  lineage?: string;
  serial?: number;
  /** Seed for the `terraform_data` ids, so two runs generate the same state. */
  seed?: number;
}

export interface BigState {
  size: number;
  /** The state file text, as terraform writes it (2-space JSON, trailing newline). */
  text: string;
  instanceCount: number;
  resourceCount: number;
  /** Dependency edges (`dependencies` entries over all instances). */
  edgeCount: number;
  lineage: string;
  serial: number;
}

export const PRIMARY_LEADER = 'module.primary_herd.terraform_data.leader';
const PRIMARY = 'module.primary_herd';
const SHADOW = 'module.shadow_herd';
const PROVIDER = 'provider["terraform.io/builtin/terraform"]';
const NAME = 'terraform_data.deployment_name';
const ID = 'terraform_data.deployment_id';

/** Instances of `examples/big-state` at `size`. */
export function bigStateInstanceCount(size: number): number {
  return 2 * size + 8;
}

/**
 * The answers the demo queries must give on this topology, from the
 * topology alone: the bench checks both the SQL and the jq answers against
 * them, so a wrong generator or a wrong filter shows up as a mismatch.
 */
export function bigStateExpected(size: number): {
  byType: [string, number][];
  byModule: [string, number][];
  blastRadius: [number, number];
} {
  return {
    byType: [['terraform_data', bigStateInstanceCount(size)]],
    byModule: [
      [PRIMARY, 2 * size + 1],
      ['(root)', 4],
      [SHADOW, 3],
    ],
    // The leader itself, its 2 × size members, the shadow herd (3) and the
    // summary; deepest 2: the summary via the primary tags, the shadow
    // members via the shadow leader.
    blastRadius: [2 * size + 5, 2],
  };
}

export function generateBigState(options: BigStateOptions): BigState {
  const size = Math.floor(options.size);
  if (!(size >= 1)) throw new Error(`size must be at least 1, got ${options.size}`);
  const deployment = options.deployment ?? 'big-state';
  const random = xorshift(options.seed ?? 0xb16);
  const id = () => uuid(random);
  const lineage = options.lineage ?? uuid(random);
  const serial = options.serial ?? 1;

  const deploymentId = sha256(deployment).slice(0, 16);
  const marker = { deployment, id: deploymentId };
  const primary = herd(PRIMARY, size, deploymentId, [ID, NAME], id);
  const shadow = herd(SHADOW, 1, primary.leaderValue, [PRIMARY_LEADER, ID, NAME], id);
  const summaryValue = {
    deployment,
    primary_leader: primary.leaderValue,
    primary_size: size,
    shadow_leader: shadow.leaderValue,
  };
  const summaryType: JsonValue = [
    'object',
    {
      deployment: 'string',
      primary_leader: 'string',
      primary_size: 'number',
      shadow_leader: 'string',
    },
  ];

  // Terraform's order: by module, then mode, type and name.
  const resources: ResourceV4[] = [
    resource(undefined, 'deployment_id', [
      instance(undefined, id(), typed(deploymentId, 'string'), [NAME]),
    ]),
    resource(undefined, 'deployment_marker', [
      instance(undefined, id(), typed(marker, ['object', { deployment: 'string', id: 'string' }]), [
        ID,
        NAME,
      ]),
    ]),
    resource(undefined, 'deployment_name', [
      instance(undefined, id(), typed(deployment, 'string'), []),
    ]),
    resource(undefined, 'summary', [
      instance(undefined, id(), typed(summaryValue, summaryType), [
        PRIMARY_LEADER,
        `${PRIMARY}.terraform_data.tag`,
        `${SHADOW}.terraform_data.leader`,
        ID,
        NAME,
      ]),
    ]),
    ...primary.resources,
    ...shadow.resources,
  ];

  const document: StateDocumentV4 = {
    version: 4,
    terraform_version: '1.11.4',
    serial,
    lineage,
    outputs: { summary: { value: summaryValue, type: summaryType } },
    resources,
    check_results: null,
  };
  let instanceCount = 0;
  let edgeCount = 0;
  for (const r of resources) {
    instanceCount += r.instances.length;
    for (const i of r.instances) edgeCount += i.dependencies?.length ?? 0;
  }
  return {
    size,
    text: `${JSON.stringify(document, null, 2)}\n`,
    instanceCount,
    resourceCount: resources.length,
    edgeCount,
    lineage,
    serial,
  };
}

/** `modules/herd` at `size`: label[size], leader, tag[size] (terraform's order). */
function herd(
  module: string,
  size: number,
  seed: string,
  upstream: string[],
  id: () => string,
): { leaderValue: string; resources: ResourceV4[] } {
  const leaderValue = sha256(`leader:${seed}`).slice(0, 16);
  const leaderAddress = `${module}.terraform_data.leader`;
  // Terraform records the transitive dependencies, sorted.
  const memberDeps = [...new Set([leaderAddress, ...upstream])].sort();
  const leaderDeps = [...upstream].sort();
  return {
    leaderValue,
    resources: [
      resource(
        module,
        'label',
        range(size, (i) =>
          instance(i, id(), typed(`label-${i}-${leaderValue.slice(0, 6)}`, 'string'), memberDeps),
        ),
      ),
      resource(module, 'leader', [
        instance(undefined, id(), typed(leaderValue, 'string'), leaderDeps),
      ]),
      resource(
        module,
        'tag',
        range(size, (i) =>
          instance(
            i,
            id(),
            typed(sha256(`tag:${leaderValue}:${i}`).slice(0, 8), 'string'),
            memberDeps,
          ),
        ),
      ),
    ],
  };
}

function resource(
  module: string | undefined,
  name: string,
  instances: InstanceObjectV4[],
): ResourceV4 {
  return {
    ...(module === undefined ? {} : { module }),
    mode: 'managed',
    type: 'terraform_data',
    name,
    provider: PROVIDER,
    instances,
  };
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

/** `terraform_data.input`/`output` are dynamically typed: state stores value and type. */
function typed(value: JsonValue, type: JsonValue): JsonObject {
  return { value, type };
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

function range<T>(n: number, f: (i: number) => T): T[] {
  return Array.from({ length: n }, (_, i) => f(i));
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
