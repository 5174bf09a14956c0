import { ProviderSchema, SchemaBlock } from '../../domain/cty/schema';
import { DomainError } from '../../domain/shared/domain-error';
import {
  canonicalHash,
  JsonObject,
  parseStateDocument,
  ResourceV4,
  StateDocumentV4,
} from '../../domain/terraform';
import {
  OpenProviderOptions,
  ProviderOpener,
  ProviderState,
  ReadOutcome,
  RefreshProvider,
} from './provider-opener.port';
import type { RefreshHost } from './refresh-host';
import { MAX_DEFAULT_POOL, MIN_READS_PER_PROCESS, poolSize } from './refresh-group';
import { RefreshOrchestrator, RefreshOrchestratorSettings } from './refresh-orchestrator';
import { RefreshOptions } from './refresh-report';
import type { RefreshResult } from '../../domain/refresh';
import type { LockInfo } from '../../domain/state';
import type { FinishedRun, StartedRun } from './refresh-commands';
import {
  FinishRefreshRun,
  LockOutcome,
  RefreshServerPort,
  StartRefreshRun,
} from './refresh-server.port';

const AWS = 'registry.terraform.io/hashicorp/aws';
const RANDOM = 'registry.terraform.io/hashicorp/random';

// ---------------------------------------------------------------- fakes

class FakeServer implements RefreshServerPort {
  document: StateDocumentV4;
  holder: LockInfo | null = null;
  configs = new Map<string, JsonObject>();
  locks: LockInfo[] = [];
  unlocks: LockInfo[] = [];
  started: StartRefreshRun[] = [];
  results: RefreshResult[][] = [];
  finished: FinishRefreshRun[] = [];
  getStateError: Error | null = null;
  finishError: Error | null = null;
  /** Runs as the finish arrives, e.g. to move a test clock. */
  onFinish: () => void = () => undefined;
  /** While set, the lock is answered only once this settles (a slow lock request). */
  lockAnswer: Promise<void> | null = null;

  constructor(document: StateDocumentV4) {
    this.document = document;
  }

  async getState(): Promise<string> {
    if (this.getStateError) throw this.getStateError;
    return JSON.stringify(this.document);
  }
  async lock(_name: string, info: LockInfo): Promise<LockOutcome> {
    this.locks.push(info);
    await this.lockAnswer;
    return this.holder ? { acquired: false, holder: this.holder } : { acquired: true };
  }
  async unlock(_name: string, info: LockInfo): Promise<void> {
    this.unlocks.push(info);
  }
  async startRun(request: StartRefreshRun): Promise<StartedRun> {
    this.started.push(request);
    return { runId: 'run-1', stateId: 'state-1', fromVersion: 4, fromSerial: this.document.serial };
  }
  async recordResults(_runId: string, results: RefreshResult[]): Promise<void> {
    this.results.push(results);
  }
  async finishRun(runId: string, request: FinishRefreshRun): Promise<FinishedRun> {
    this.finished.push(request);
    this.onFinish();
    if (this.finishError && request.status !== 'failed') throw this.finishError;
    return {
      runId,
      status: request.status,
      toVersion: request.document ? 5 : null,
      checked: 0,
      changed: 0,
      failed: 0,
      normalized: 0,
      skipped: 0,
    };
  }
  async getProviderConfig(
    _state: string,
    source: string,
    alias: string | null,
  ): Promise<JsonObject | null> {
    return this.configs.get(`${source}|${alias ?? ''}`) ?? null;
  }
  async getProviderSchema(): Promise<ProviderSchema | null> {
    return null;
  }
  async putProviderSchema(): Promise<void> {}

  get allResults(): RefreshResult[] {
    return this.results.flat();
  }
  get committed(): StateDocumentV4 | undefined {
    return this.finished.find((f) => f.document)?.document;
  }
}

type Remote = JsonObject | null | Error;

interface ProviderBehaviour {
  /** Remote objects by id; an Error makes the read fail with it. */
  remote: Map<string, Remote>;
  schemaVersions: Record<string, number>;
  readDelayMs?: number;
  /** A delay per object, so reads finish out of order. */
  readDelayFor?: (id: string) => number;
  /** A provider that does not honour Stop: its reads run on regardless. */
  ignoresStop?: boolean;
  /** Called as each read starts, e.g. to crash the process on a given object. */
  onRead?: (provider: FakeProvider, id: string) => void;
  providerBlock?: SchemaBlock;
  /** A Configure refused with this error (null: accepted). */
  configureError?: (config: JsonObject) => Error | null;
}

class FakeProvider implements RefreshProvider {
  readonly version = '1.0.0';
  readonly schema: ProviderSchema;
  configured: JsonObject[] = [];
  upgrades: { typeName: string; version: number; attributes: JsonObject }[] = [];
  reads: { typeName: string; current: ProviderState; private?: Uint8Array }[] = [];
  stops = 0;
  closed = 0;
  readonly crashed: Promise<string>;
  /** Makes the process "exit" as a crash: its reads in flight and later ones fail. */
  crash: (how: string) => void = () => undefined;
  private dead: string | null = null;
  private readonly inFlight = new Set<(e: Error) => void>();

  constructor(
    readonly source: string,
    private readonly behaviour: ProviderBehaviour,
    private readonly tracker: ConcurrencyTracker,
  ) {
    const resourceSchemas: ProviderSchema['resourceSchemas'] = {};
    for (const [type, version] of Object.entries(behaviour.schemaVersions)) {
      resourceSchemas[type] = { version, block: { attributes: [], blockTypes: [] } };
    }
    this.crashed = new Promise((resolve) => {
      this.crash = (how) => {
        this.dead = how;
        for (const cancel of this.inFlight) cancel(new Error(`plugin ${how} during ReadResource`));
        this.inFlight.clear();
        resolve(how);
      };
    });
    this.schema = {
      protocolVersion: 6,
      provider: {
        version: 0,
        block: behaviour.providerBlock ?? { attributes: [], blockTypes: [] },
      },
      resourceSchemas,
      dataSourceSchemas: {},
      serverCapabilities: {
        planDestroy: false,
        getProviderSchemaOptional: false,
        moveResourceState: false,
      },
    };
  }

  async configure(config: JsonObject): Promise<void> {
    this.configured.push(config);
    const refused = this.behaviour.configureError?.(config);
    if (refused) throw refused;
  }

  async upgradeResourceState(
    typeName: string,
    version: number,
    attributes: JsonObject,
  ): Promise<ProviderState> {
    this.upgrades.push({ typeName, version, attributes });
    const { note, ...rest } = attributes;
    return { attributes: { ...rest, comment: note ?? null }, wire: new Uint8Array([1, 2, 3]) };
  }

  async readResource(
    typeName: string,
    current: ProviderState,
    privateData: Uint8Array | undefined,
  ): Promise<ReadOutcome> {
    if (this.dead) throw new Error(`plugin ${this.dead}`);
    this.reads.push({ typeName, current, private: privateData });
    const done = this.tracker.enter(this.source);
    try {
      this.behaviour.onRead?.(this, String(current.attributes.id));
      if (this.dead) throw new Error(`plugin ${this.dead} during ReadResource`);
      const delay = this.behaviour.readDelayFor?.(String(current.attributes.id)) ?? 0;
      if (this.behaviour.readDelayMs || delay) {
        await new Promise<void>((resolve, reject) => {
          const timer = setTimeout(resolve, this.behaviour.readDelayMs ?? delay).unref();
          this.inFlight.add((e) => {
            clearTimeout(timer);
            reject(e);
          });
        });
      }
      const remote = this.behaviour.remote.get(String(current.attributes.id));
      if (remote instanceof Error) throw remote;
      if (remote === undefined)
        throw new Error(`test bug: no remote object ${current.attributes.id}`);
      return {
        newState: remote === null ? null : { attributes: remote },
        private: privateData ?? new Uint8Array(),
      };
    } finally {
      done();
    }
  }

  async stop(): Promise<void> {
    this.stops++;
    if (this.behaviour.ignoresStop) return;
    for (const cancel of this.inFlight)
      cancel(new Error('Read cancelled: the provider was asked to stop'));
    this.inFlight.clear();
  }

  async close(): Promise<void> {
    this.closed++;
  }
}

class ConcurrencyTracker {
  active = 0;
  maxActive = 0;
  private readonly perGroup = new Map<string, number>();
  maxPerGroup = 0;

  enter(group: string): () => void {
    this.active++;
    this.maxActive = Math.max(this.maxActive, this.active);
    const n = (this.perGroup.get(group) ?? 0) + 1;
    this.perGroup.set(group, n);
    this.maxPerGroup = Math.max(this.maxPerGroup, n);
    return () => {
      this.active--;
      this.perGroup.set(group, (this.perGroup.get(group) ?? 1) - 1);
    };
  }
}

class FakeOpener implements ProviderOpener {
  readonly opened: FakeProvider[] = [];
  readonly tracker = new ConcurrencyTracker();
  failOpen = new Map<string, Error>();

  constructor(private readonly behaviours: Record<string, ProviderBehaviour>) {}

  async open(source: string, _options: OpenProviderOptions): Promise<RefreshProvider> {
    const failure = this.failOpen.get(source);
    if (failure) throw failure;
    const behaviour = this.behaviours[source];
    if (!behaviour) throw new Error(`provider ${source} not found`);
    const p = new FakeProvider(source, behaviour, this.tracker);
    this.opened.push(p);
    return p;
  }

  of(source: string): FakeProvider[] {
    return this.opened.filter((p) => p.source === source);
  }
}

// ---------------------------------------------------------------- fixtures

function resource(
  type: string,
  name: string,
  provider: string,
  objects: { id: string; schemaVersion?: number; attrs?: JsonObject; private?: string }[],
  mode: 'managed' | 'data' = 'managed',
): ResourceV4 {
  return {
    mode,
    type,
    name,
    provider,
    instances: objects.map((o, i) => ({
      ...(objects.length > 1 ? { index_key: i } : {}),
      schema_version: o.schemaVersion ?? 0,
      attributes: { id: o.id, ...(o.attrs ?? {}) },
      ...(o.private ? { private: o.private } : {}),
      sensitive_attributes: [],
    })),
  };
}

const awsDefault = `provider["${AWS}"]`;
const awsWest = `provider["${AWS}"].west`;
const random = `provider["${RANDOM}"]`;

function documentOf(resources: ResourceV4[]): StateDocumentV4 {
  return parseStateDocument({
    version: 4,
    terraform_version: '1.11.4',
    serial: 7,
    lineage: 'lin-1',
    outputs: {},
    resources,
  });
}

function standardDocument(): StateDocumentV4 {
  return documentOf([
    resource('aws_s3_bucket', 'logs', awsDefault, [
      { id: 'b1', attrs: { acl: 'private' } },
      { id: 'b2', attrs: { acl: 'private' } },
    ]),
    resource('aws_s3_bucket', 'west', awsWest, [{ id: 'w1', attrs: { acl: 'private' } }]),
    resource('random_id', 'x', random, [{ id: 'r1', attrs: { hex: 'ab' } }]),
    resource('aws_caller_identity', 'me', awsDefault, [{ id: 'acct' }], 'data'),
  ]);
}

/** Every remote object exactly as stored: nothing drifted. */
function inSync(): Record<string, ProviderBehaviour> {
  return {
    [AWS]: {
      remote: new Map<string, Remote>([
        ['b1', { id: 'b1', acl: 'private' }],
        ['b2', { id: 'b2', acl: 'private' }],
        ['w1', { id: 'w1', acl: 'private' }],
      ]),
      schemaVersions: { aws_s3_bucket: 0 },
    },
    [RANDOM]: {
      remote: new Map<string, Remote>([['r1', { id: 'r1', hex: 'ab' }]]),
      schemaVersions: { random_id: 0 },
    },
  };
}

/** Someone else's terraform apply holding the state's lock. */
const BOB_APPLYING: LockInfo = {
  ID: 'abc-123',
  Operation: 'OperationTypeApply',
  Info: '',
  Who: 'bob@ci',
  Version: '1.11.4',
  Created: '2026-01-01T00:00:00Z',
  Path: '',
};

function options(overrides: Partial<RefreshOptions> = {}): RefreshOptions {
  return {
    dryRun: false,
    failFast: false,
    concurrency: 4,
    actor: 'alice@host',
    providerSearchPaths: [],
    ...overrides,
  };
}

const T0 = Date.parse('2026-11-30T08:00:00.000Z');

/** Time stands still unless a test moves it. */
class ManualClock {
  at = T0;
  now(): Date {
    return new Date(this.at);
  }
}

function setup(
  doc = standardDocument(),
  behaviours = inSync(),
  settings: RefreshOrchestratorSettings & Partial<RefreshHost> = {},
) {
  const server = new FakeServer(doc);
  const opener = new FakeOpener(behaviours);
  const manual = new ManualClock();
  const {
    clock = manual,
    env = {},
    cpuCount = 4,
    ids = { uuid: () => 'lock-1' },
    ...rest
  } = settings;
  const orchestrator = new RefreshOrchestrator(server, opener, { clock, ids, env, cpuCount }, rest);
  return { server, opener, orchestrator, behaviours, clock: manual };
}

const never = new AbortController().signal;

/** Providers started early (before the lock and the configs) and then not used: all ended, none configured or read. */
function expectNoneLeftOrUsed(opener: FakeOpener): void {
  expect(opener.opened.every((p) => p.closed === 1)).toBe(true);
  expect(opener.opened.flatMap((p) => [...p.configured, ...p.reads])).toEqual([]);
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/** Waits (a macrotask at a time) until the condition holds; fails the test after 2 s. */
async function until(condition: () => boolean): Promise<void> {
  for (let waited = 0; !condition(); waited += 5) {
    if (waited > 2_000) throw new Error('condition not reached within 2 s');
    await new Promise((r) => setTimeout(r, 5));
  }
}

// ---------------------------------------------------------------- specs

describe('RefreshOrchestrator', () => {
  it('opens one provider per provider configuration, skips data sources and commits serial + 1', async () => {
    const { server, opener, orchestrator } = setup();

    const report = await orchestrator.run('prod', options(), never);

    expect(opener.opened.map((p) => p.source).sort()).toEqual([AWS, AWS, RANDOM]);
    const reads = opener.opened.flatMap((p) => p.reads.map((r) => r.current.attributes.id)).sort();
    expect(reads).toEqual(['b1', 'b2', 'r1', 'w1']);
    expect(report).toMatchObject({
      runId: 'run-1',
      status: 'succeeded',
      checked: 4,
      changed: 0,
      gone: 0,
      failed: 0,
      toVersion: 5,
    });
    const committed = server.committed!;
    expect(committed).toMatchObject({ serial: 8, lineage: 'lin-1', terraform_version: '1.11.4' });
    expect(committed.resources.map((r) => `${r.mode}.${r.type}.${r.name}`)).toEqual([
      'data.aws_caller_identity.me',
      'managed.aws_s3_bucket.logs',
      'managed.aws_s3_bucket.west',
      'managed.random_id.x',
    ]);
    expect(server.finished).toEqual([
      expect.objectContaining({ status: 'succeeded', lockId: 'lock-1' }),
    ]);
    expect(opener.opened.every((p) => p.closed === 1)).toBe(true);
  });

  it('locks as OperationTypeRefresh for the actor, naming the run, and unlocks with the same lock', async () => {
    const { server, orchestrator } = setup();

    await orchestrator.run('prod', options(), never);

    expect(server.locks).toEqual([
      expect.objectContaining({
        ID: 'lock-1',
        Operation: 'OperationTypeRefresh',
        Who: 'alice@host',
        Info: 'kl refresh run run-1',
      }),
    ]);
    expect(server.unlocks).toEqual(server.locks);
    expect(server.started).toEqual([{ state: 'prod', dryRun: false, actor: 'alice@host' }]);
  });

  it('configures each group with its stored config, env references resolved and every attribute present', async () => {
    const behaviours = inSync();
    behaviours[AWS].providerBlock = {
      attributes: [
        { name: 'region', type: 'string', optional: true },
        { name: 'secret_key', type: 'string', optional: true },
        { name: 'profile', type: 'string', optional: true },
      ],
      blockTypes: [
        {
          typeName: 'endpoints',
          nesting: 'list',
          block: { attributes: [{ name: 's3', type: 'string', optional: true }], blockTypes: [] },
        },
        {
          typeName: 'assume_role',
          nesting: 'list',
          block: { attributes: [{ name: 'arn', type: 'string', optional: true }], blockTypes: [] },
        },
      ],
    };
    const { server, opener, orchestrator } = setup(standardDocument(), behaviours, {
      env: { AWS_SECRET: 's3cr3t' },
    });
    server.configs.set(`${AWS}|`, {
      region: 'eu-west-1',
      secret_key: { env: 'AWS_SECRET' },
      endpoints: { s3: 'http://moto:5000' },
    });
    server.configs.set(`${AWS}|west`, { region: 'us-west-2' });

    await orchestrator.run('prod', options(), never);

    const configs = opener.of(AWS).map((p) => p.configured[0]);
    expect(configs).toContainEqual({
      region: 'eu-west-1',
      secret_key: 's3cr3t',
      profile: null,
      endpoints: [{ s3: 'http://moto:5000' }],
      assume_role: [],
    });
    expect(configs).toContainEqual({
      region: 'us-west-2',
      secret_key: null,
      profile: null,
      endpoints: [],
      assume_role: [],
    });
    expect(opener.of(RANDOM)[0].configured).toEqual([{}]);
  });

  it('stops the run, naming the variable, when a referenced env var is not set', async () => {
    const { server, opener, orchestrator } = setup();
    server.configs.set(`${AWS}|`, { secret_key: { env: 'AWS_SECRET_ACCESS_KEY' } });

    await expect(orchestrator.run('prod', options(), never)).rejects.toThrow(
      /secret_key refers to environment variable AWS_SECRET_ACCESS_KEY, which is not set/,
    );
    expect(opener.opened).toEqual([]);
    expect(server.finished).toEqual([expect.objectContaining({ status: 'failed' })]);
    expect(server.unlocks).toHaveLength(1);
  });

  it('runs groups in parallel up to the concurrency, and with parallelism 1 the instances of one group serially', async () => {
    const doc = documentOf([
      resource('aws_s3_bucket', 'logs', awsDefault, [{ id: 'b1' }, { id: 'b2' }, { id: 'b3' }]),
      resource('aws_s3_bucket', 'west', awsWest, [{ id: 'w1' }, { id: 'w2' }]),
      resource('random_id', 'x', random, [{ id: 'r1' }, { id: 'r2' }]),
    ]);
    const behaviours = (): Record<string, ProviderBehaviour> => ({
      [AWS]: {
        remote: new Map<string, Remote>(
          ['b1', 'b2', 'b3', 'w1', 'w2'].map((id) => [id, { id }] as [string, Remote]),
        ),
        schemaVersions: { aws_s3_bucket: 0 },
        readDelayMs: 15,
      },
      [RANDOM]: {
        remote: new Map<string, Remote>(['r1', 'r2'].map((id) => [id, { id }] as [string, Remote])),
        schemaVersions: { random_id: 0 },
        readDelayMs: 15,
      },
    });

    const wide = setup(doc, behaviours());
    await wide.orchestrator.run('prod', options({ concurrency: 2, parallelism: 1 }), never);
    expect(wide.opener.tracker.maxActive).toBe(2);
    // Two aws groups share a source but not a process: per process, one read at a time.
    expect(Math.max(...wide.opener.opened.map((p) => p.reads.length))).toBe(3);

    const narrow = setup(doc, behaviours());
    await narrow.orchestrator.run('prod', options({ concurrency: 1, parallelism: 1 }), never);
    expect(narrow.opener.tracker.maxActive).toBe(1);

    // Like terraform's -parallelism: several reads in flight on one provider process.
    const parallel = setup(doc, behaviours());
    const report = await parallel.orchestrator.run(
      'prod',
      options({ concurrency: 1, parallelism: 2 }),
      never,
    );
    expect(parallel.opener.tracker.maxPerGroup).toBe(2);
    expect(parallel.opener.tracker.maxActive).toBe(2);
    expect(report.checked).toBe(7);
  });

  it('upgrades state written with an older schema version before reading, and stores the upgraded form', async () => {
    const doc = documentOf([
      resource('aws_s3_bucket', 'old', awsDefault, [
        { id: 'b1', schemaVersion: 0, attrs: { note: 'hi' } },
      ]),
      resource('aws_s3_bucket', 'new', awsDefault, [
        { id: 'b2', schemaVersion: 1, attrs: { comment: 'ok' } },
      ]),
    ]);
    const behaviours: Record<string, ProviderBehaviour> = {
      [AWS]: {
        remote: new Map<string, Remote>([
          ['b1', { id: 'b1', comment: 'hi' }],
          ['b2', { id: 'b2', comment: 'ok' }],
        ]),
        schemaVersions: { aws_s3_bucket: 1 },
      },
    };
    const { server, opener, orchestrator } = setup(doc, behaviours);

    const report = await orchestrator.run('prod', options(), never);

    const provider = opener.opened[0];
    expect(provider.upgrades).toEqual([
      { typeName: 'aws_s3_bucket', version: 0, attributes: { id: 'b1', note: 'hi' } },
    ]);
    // The read gets the provider's own upgraded value, wire bytes included.
    const read = provider.reads.find((r) => r.current.attributes.id === 'b1')!;
    expect(read.current).toEqual({
      attributes: { id: 'b1', comment: 'hi' },
      wire: new Uint8Array([1, 2, 3]),
    });
    const old = server.committed!.resources.find((r) => r.name === 'old')!.instances[0];
    expect(old).toMatchObject({ schema_version: 1, attributes: { id: 'b1', comment: 'hi' } });
    expect(report.status).toBe('succeeded');
  });

  it('fails an instance written by a newer provider without calling it', async () => {
    const doc = documentOf([
      resource('aws_s3_bucket', 'future', awsDefault, [{ id: 'b1', schemaVersion: 3 }]),
    ]);
    const behaviours = inSync();
    const { opener, orchestrator } = setup(doc, behaviours);

    const report = await orchestrator.run('prod', options(), never);

    expect(report.failures).toEqual([
      {
        address: 'aws_s3_bucket.future',
        message: expect.stringContaining('schema version 3 by a newer provider'),
      },
    ]);
    expect(opener.opened[0].reads).toEqual([]);
  });

  it('reports drift with changed paths and a new private blob, sorted by address', async () => {
    const behaviours = inSync();
    behaviours[AWS].remote.set('b2', { id: 'b2', acl: 'public-read' });
    behaviours[AWS].remote.set('b1', { id: 'b1', acl: 'public-read' });
    const { server, orchestrator } = setup(standardDocument(), behaviours);

    const report = await orchestrator.run('prod', options(), never);

    expect(report.drifted).toEqual(['aws_s3_bucket.logs[0]', 'aws_s3_bucket.logs[1]']);
    expect(report.changed).toBe(2);
    const b1 = server.allResults.find((r) => r.address === 'aws_s3_bucket.logs[0]')!;
    expect(b1).toEqual({
      address: 'aws_s3_bucket.logs[0]',
      provider: awsDefault,
      outcome: 'drifted',
      beforeHash: canonicalHash({ id: 'b1', acl: 'private' }),
      afterHash: canonicalHash({ id: 'b1', acl: 'public-read' }),
      changedPaths: ['acl'],
    });
    const unchanged = server.allResults.find((r) => r.address === 'random_id.x')!;
    expect(unchanged).toMatchObject({ outcome: 'unchanged', changedPaths: [] });
    expect(unchanged.afterHash).toBe(unchanged.beforeHash);
  });

  it('stores a read that differs in spelling only, counting it normalized, not drifted', async () => {
    const doc = documentOf([
      resource('aws_ssm_parameter', 'quiet', awsDefault, [
        { id: 'b1', attrs: { value: 'steady', tags: null, rules: [] } },
      ]),
      resource('aws_ssm_parameter', 'loud', awsDefault, [
        { id: 'b2', attrs: { value: 'v1', tags: null } },
      ]),
    ]);
    const behaviours = inSync();
    behaviours[AWS].remote.set('b1', { id: 'b1', value: 'steady', tags: {}, rules: null });
    behaviours[AWS].remote.set('b2', { id: 'b2', value: 'v2', tags: {} });
    behaviours[AWS].schemaVersions.aws_ssm_parameter = 0;
    const { server, orchestrator } = setup(doc, behaviours);

    const report = await orchestrator.run('prod', options(), never);

    expect(report).toMatchObject({
      status: 'succeeded',
      checked: 2,
      changed: 1,
      normalized: 1,
      drifted: ['aws_ssm_parameter.loud'],
      normalizedAddresses: ['aws_ssm_parameter.quiet'],
      toVersion: 5,
    });
    const byAddress = Object.fromEntries(server.allResults.map((r) => [r.address, r]));
    expect(byAddress['aws_ssm_parameter.quiet']).toMatchObject({
      outcome: 'normalized',
      changedPaths: ['rules', 'tags'],
    });
    expect(byAddress['aws_ssm_parameter.quiet'].afterHash).not.toBe(
      byAddress['aws_ssm_parameter.quiet'].beforeHash,
    );
    // Drift names the real change only, not the normalization beside it.
    expect(byAddress['aws_ssm_parameter.loud']).toMatchObject({
      outcome: 'drifted',
      changedPaths: ['value'],
    });
    // Both reads are committed as the provider returned them.
    const committed = server.committed!.resources.map((r) => r.instances[0].attributes);
    expect(committed).toEqual([
      { id: 'b2', value: 'v2', tags: {} },
      { id: 'b1', value: 'steady', tags: {}, rules: null },
    ]);
  });

  it('skips built-in resources without starting anything for them, keeping them as they are', async () => {
    const builtIn = 'provider["terraform.io/builtin/terraform"]';
    const doc = documentOf([
      resource('terraform_data', 'd', builtIn, [
        { id: 'd1', attrs: { input: { value: 'x', type: 'string' } } },
        { id: 'd2' },
      ]),
      resource('random_id', 'x', random, [{ id: 'r1', attrs: { hex: 'ab' } }]),
    ]);
    const progress: number[] = [];
    const { server, opener, orchestrator } = setup(doc);

    const report = await orchestrator.run(
      'prod',
      options({ onProgress: (p) => progress.push(p.done) }),
      never,
    );

    expect(opener.opened.map((p) => p.source)).toEqual([RANDOM]);
    expect(report).toMatchObject({
      status: 'succeeded',
      checked: 1,
      skipped: 2,
      failed: 0,
      toVersion: 5,
    });
    expect(server.allResults.filter((r) => r.outcome === 'skipped')).toEqual([
      expect.objectContaining({
        address: 'terraform_data.d[0]',
        provider: builtIn,
        changedPaths: [],
      }),
      expect.objectContaining({ address: 'terraform_data.d[1]', provider: builtIn }),
    ]);
    expect(server.committed!.resources.find((r) => r.type === 'terraform_data')).toEqual(
      doc.resources[0],
    );
    expect(progress.at(-1)).toBe(3);
  });

  it('succeeds on a state of built-ins only, reading and committing nothing', async () => {
    const builtIn = 'provider["terraform.io/builtin/terraform"]';
    const doc = documentOf([resource('terraform_data', 'd', builtIn, [{ id: 'd1' }])]);
    const { server, opener, orchestrator } = setup(doc);

    const report = await orchestrator.run('prod', options(), never);

    expect(opener.opened).toEqual([]);
    expect(report).toMatchObject({ status: 'succeeded', checked: 0, skipped: 1, toVersion: null });
    expect(server.finished).toEqual([
      expect.objectContaining({ status: 'succeeded', document: undefined }),
    ]);
    expect(server.unlocks).toHaveLength(1);
  });

  it('under an env policy, refuses a name it does not allow before starting any provider', async () => {
    const { server, opener, orchestrator } = setup(standardDocument(), inSync(), {
      env: { KL_DATABASE_URL: 'postgres://kl:secret@db/kl', AWS_SECRET_ACCESS_KEY: 's' },
      envPolicy: { refusal: (n) => (n.startsWith('AWS_') ? null : 'ask the operator') },
    });
    server.configs.set(`${RANDOM}|`, {});
    server.configs.set(`${AWS}|west`, {
      secret_key: { env: 'AWS_SECRET_ACCESS_KEY' },
      endpoints: [{ sqs: 'http://127.0.0.1:9', access_key: { env: 'KL_DATABASE_URL' } }],
    });

    const failure = orchestrator.run('prod', options(), never);

    await expect(failure).rejects.toMatchObject({
      code: 'REFRESH.CONFIG_ENV_REFUSED',
      message: `provider ${AWS} (alias west): endpoints[0].access_key refers to environment variable KL_DATABASE_URL, which this server may not read: ask the operator`,
    });
    await failure.catch(() => undefined);
    expect(opener.opened).toEqual([]);
    expect(server.results).toEqual([]);
    // The run is recorded as failed with the refusal; nothing is committed.
    expect(server.finished).toEqual([
      { status: 'failed', errorSummary: expect.stringContaining('KL_DATABASE_URL, which this') },
    ]);
    expect(server.unlocks).toHaveLength(1);
  });

  it("never gives out a value resolved from the environment that a provider's error repeats", async () => {
    const secret = 'wJalrXUtnFEMI/K7MDENG+bPxRfi"CY';
    const behaviours = inSync();
    behaviours[AWS].providerBlock = {
      attributes: [
        { name: 'region', type: 'string', optional: true },
        { name: 'secret_key', type: 'string', optional: true },
      ],
      blockTypes: [],
    };
    // The default configuration reads, but b1's read names the key (URL-encoded, as in a
    // request it sent); the west one is refused at Configure, quoting its config as JSON.
    behaviours[AWS].remote.set(
      'b1',
      new Error(`GET https://s3/?key=${encodeURIComponent(secret)} refused\nkey: ${secret}`),
    );
    behaviours[AWS].configureError = (config) =>
      config.region === 'us-west-2'
        ? new Error(`invalid config ${JSON.stringify(config)}: key ${secret} expired`)
        : null;
    const { server, orchestrator } = setup(standardDocument(), behaviours, {
      env: { AWS_SECRET_ACCESS_KEY: secret },
    });
    server.configs.set(`${AWS}|`, { secret_key: { env: 'AWS_SECRET_ACCESS_KEY' } });
    server.configs.set(`${AWS}|west`, {
      region: 'us-west-2',
      secret_key: { env: 'AWS_SECRET_ACCESS_KEY' },
    });

    const report = await orchestrator.run('prod', options(), never);

    const given = JSON.stringify({ results: server.results, finished: server.finished, report });
    for (const form of [secret, encodeURIComponent(secret), JSON.stringify(secret).slice(1, -1)]) {
      expect(given).not.toContain(form);
    }
    expect(report.status).toBe('failed');
    expect(report.failures).toEqual([
      { address: 'aws_s3_bucket.logs[0]', message: 'GET https://s3/?key=*** refused' },
      {
        address: 'aws_s3_bucket.west',
        message: `provider ${AWS} (alias west): invalid config {"region":"us-west-2","secret_key":"***"}: key *** expired`,
      },
    ]);
  });

  it('rethrows and records a run failure that repeats an environment value masked', async () => {
    const secret = 'postgres://kl:hunter2hunter2@db/kl';
    const behaviours = inSync();
    behaviours[RANDOM].providerBlock = {
      attributes: [{ name: 'url', type: 'string', optional: true }],
      blockTypes: [],
    };
    const { server, orchestrator } = setup(standardDocument(), behaviours, {
      env: { DB_URL: secret },
    });
    server.configs.set(`${RANDOM}|`, { url: { env: 'DB_URL' } });
    server.finishError = new DomainError('REFRESH.INVALID', `cannot commit: ${secret}`, {
      url: secret,
    });

    const failure = orchestrator.run('prod', options(), never);

    await expect(failure).rejects.toMatchObject({
      code: 'REFRESH.INVALID',
      message: 'cannot commit: ***',
    });
    const error = (await failure.catch((e: unknown) => e)) as DomainError;
    expect(
      JSON.stringify({ ...error, stack: error.stack, metadata: error.metadata }),
    ).not.toContain('hunter2');
    expect(server.finished.at(-1)).toEqual({ status: 'failed', errorSummary: expect.any(String) });
    expect(JSON.stringify(server.finished)).not.toContain('hunter2');
  });

  it('passes the instance private blob to ReadResource and stores what comes back', async () => {
    const doc = documentOf([
      resource('aws_s3_bucket', 'p', awsDefault, [
        { id: 'b1', attrs: { acl: 'private' }, private: Buffer.from('{"t":1}').toString('base64') },
      ]),
    ]);
    const { server, opener, orchestrator } = setup(doc);

    await orchestrator.run('prod', options(), never);

    expect(Buffer.from(opener.opened[0].reads[0].private!).toString()).toBe('{"t":1}');
    expect(server.committed!.resources[0].instances[0].private).toBe(
      Buffer.from('{"t":1}').toString('base64'),
    );
  });

  it('drops an object the provider no longer finds from the document and reports it gone', async () => {
    const behaviours = inSync();
    behaviours[AWS].remote.set('w1', null);
    const { server, orchestrator } = setup(standardDocument(), behaviours);

    const report = await orchestrator.run('prod', options(), never);

    expect(report).toMatchObject({ gone: 1, goneAddresses: ['aws_s3_bucket.west'], changed: 0 });
    expect(server.allResults).toContainEqual(
      expect.objectContaining({ address: 'aws_s3_bucket.west', outcome: 'gone', afterHash: null }),
    );
    expect(server.committed!.resources.map((r) => r.name)).not.toContain('west');
    expect(report.toVersion).toBe(5);
  });

  it('commits nothing when a resource fails, but checks every other one', async () => {
    const behaviours = inSync();
    behaviours[AWS].remote.set('b1', new Error('AccessDenied: not allowed'));
    const { server, orchestrator } = setup(standardDocument(), behaviours);

    const report = await orchestrator.run('prod', options(), never);

    expect(report).toMatchObject({ status: 'failed', checked: 4, failed: 1, toVersion: null });
    expect(report.failures).toEqual([
      { address: 'aws_s3_bucket.logs[0]', message: 'AccessDenied: not allowed' },
    ]);
    expect(server.finished).toEqual([
      expect.objectContaining({ status: 'failed', document: undefined }),
    ]);
    expect(server.unlocks).toHaveLength(1);
  });

  it('fails the instances of a provider that cannot be started', async () => {
    const { opener, orchestrator } = setup();
    opener.failOpen.set(
      RANDOM,
      new Error('provider registry.terraform.io/hashicorp/random not found\nsearched: /a'),
    );

    const report = await orchestrator.run('prod', options(), never);

    expect(report.failures).toEqual([
      {
        address: 'random_id.x',
        message: `provider ${RANDOM}: provider registry.terraform.io/hashicorp/random not found`,
      },
    ]);
    expect(report.status).toBe('failed');
  });

  it('fails the instances of a group whose config the provider does not take, naming the provider once', async () => {
    const { server, orchestrator } = setup();
    server.configs.set(`${AWS}|`, { regoin: 'eu-west-1' });

    const report = await orchestrator.run('prod', options(), never);

    const messages = new Set(
      report.failures.filter((f) => f.address.startsWith('aws_')).map((f) => f.message),
    );
    expect([...messages]).toEqual([
      `provider ${AWS}: provider config has no attribute "regoin" in the provider's schema`,
    ]);
    expect(report.status).toBe('failed');
  });

  it('commits nothing on a dry run, even when everything succeeded', async () => {
    const { server, orchestrator } = setup();

    const report = await orchestrator.run('prod', options({ dryRun: true }), never);

    expect(report).toMatchObject({ status: 'succeeded', dryRun: true, toVersion: null });
    expect(server.finished).toEqual([
      expect.objectContaining({ status: 'succeeded', document: undefined }),
    ]);
    expect(server.started[0].dryRun).toBe(true);
  });

  it('stops at the first failure with --fail-fast: providers are stopped and the rest is not read', async () => {
    const doc = documentOf([
      resource('aws_s3_bucket', 'logs', awsDefault, [{ id: 'b1' }, { id: 'b2' }, { id: 'b3' }]),
      resource('random_id', 'x', random, [{ id: 'r1' }, { id: 'r2' }, { id: 'r3' }]),
    ]);
    const behaviours: Record<string, ProviderBehaviour> = {
      [AWS]: {
        remote: new Map<string, Remote>([
          ['b1', new Error('boom')],
          ['b2', { id: 'b2' }],
          ['b3', { id: 'b3' }],
        ]),
        schemaVersions: { aws_s3_bucket: 0 },
      },
      [RANDOM]: {
        remote: new Map<string, Remote>(
          ['r1', 'r2', 'r3'].map((id) => [id, { id }] as [string, Remote]),
        ),
        schemaVersions: { random_id: 0 },
        readDelayMs: 50,
      },
    };
    const { server, opener, orchestrator } = setup(doc, behaviours);

    const report = await orchestrator.run(
      'prod',
      options({ failFast: true, parallelism: 1 }),
      never,
    );

    expect(report.status).toBe('failed');
    expect(report.failures).toEqual([{ address: 'aws_s3_bucket.logs[0]', message: 'boom' }]);
    expect(opener.of(AWS)[0].reads).toHaveLength(1);
    // The slow random read in flight was interrupted by Stop, not counted as a failure.
    expect(opener.of(RANDOM)[0].stops).toBeGreaterThan(0);
    expect(opener.of(RANDOM)[0].reads).toHaveLength(1);
    expect(opener.opened.every((p) => p.closed === 1)).toBe(true);
    expect(server.committed).toBeUndefined();
  });

  it('on cancellation stops every open provider, closes them and finishes the run cancelled', async () => {
    const behaviours = inSync();
    behaviours[AWS].readDelayMs = 60_000;
    behaviours[RANDOM].readDelayMs = 60_000;
    const { server, opener, orchestrator } = setup(standardDocument(), behaviours);
    const cancel = new AbortController();
    const started = Date.now();

    const running = orchestrator.run('prod', options(), cancel.signal);
    await waitFor(
      () => opener.opened.length === 3 && opener.opened.every((p) => p.reads.length > 0),
    );
    cancel.abort();
    const report = await running;

    expect(Date.now() - started).toBeLessThan(5_000);
    expect(report).toMatchObject({ status: 'cancelled', toVersion: null, failed: 0, checked: 0 });
    for (const p of opener.opened) {
      expect(p.stops).toBeGreaterThan(0);
      expect(p.closed).toBe(1);
    }
    expect(server.finished).toEqual([
      expect.objectContaining({ status: 'cancelled', document: undefined }),
    ]);
    expect(server.unlocks).toHaveLength(1);
  });

  it('returns promptly on cancellation even when a provider ignores Stop', async () => {
    const behaviours = inSync();
    behaviours[AWS].readDelayMs = 60_000;
    behaviours[AWS].ignoresStop = true;
    const { server, opener, orchestrator } = setup(standardDocument(), behaviours);
    const cancel = new AbortController();

    const running = orchestrator.run('prod', options(), cancel.signal);
    await waitFor(
      () => opener.of(AWS).length === 2 && opener.of(AWS).every((p) => p.reads.length > 0),
    );
    const cancelledAt = Date.now();
    cancel.abort();
    const report = await running;

    expect(Date.now() - cancelledAt).toBeLessThan(1_000);
    expect(report.status).toBe('cancelled');
    expect(opener.opened.every((p) => p.closed === 1)).toBe(true);
    expect(server.unlocks).toHaveLength(1);
  });

  it('refuses to run while someone else holds the lock, naming the holder', async () => {
    const { server, opener, orchestrator } = setup();
    server.holder = BOB_APPLYING;

    const failure = orchestrator.run('prod', options(), never);

    await expect(failure).rejects.toThrow(
      'state "prod" is locked by bob@ci (lock ID abc-123, operation OperationTypeApply)',
    );
    await expect(failure).rejects.toMatchObject({ code: 'STATE.LOCKED' });
    expectNoneLeftOrUsed(opener);
    expect(server.unlocks).toEqual([]);
    expect(server.finished).toEqual([expect.objectContaining({ status: 'failed' })]);
  });

  it('reports the lock holder, not a failed read of the state fetched meanwhile', async () => {
    const { server, opener, orchestrator } = setup();
    server.holder = BOB_APPLYING;
    server.getStateError = new Error('connection reset');

    await expect(orchestrator.run('prod', options(), never)).rejects.toMatchObject({
      code: 'STATE.LOCKED',
    });
    expect(opener.opened).toEqual([]);
    expect(server.unlocks).toEqual([]);
  });

  it('starts the providers while the lock is asked for, but configures and reads only once it is held', async () => {
    const { server, opener, orchestrator } = setup();
    const answer = deferred();
    server.lockAnswer = answer.promise;

    const run = orchestrator.run('prod', options(), never);
    await until(() => opener.opened.length === 3);
    expect(opener.opened.map((p) => p.source).sort()).toEqual([AWS, AWS, RANDOM]);
    expect(opener.opened.every((p) => p.configured.length === 0 && p.reads.length === 0)).toBe(
      true,
    );
    expect(server.results).toEqual([]);
    answer.resolve();
    const report = await run;

    expect(report).toMatchObject({ status: 'succeeded', checked: 4, failed: 0 });
    // The processes started early are the ones used: none more, each closed once.
    expect(opener.opened).toHaveLength(3);
    expect(opener.opened.every((p) => p.configured.length === 1 && p.closed === 1)).toBe(true);
  });

  it('ends the providers it started when the lock turns out to be held, and reads nothing', async () => {
    const { server, opener, orchestrator } = setup();
    server.holder = BOB_APPLYING;
    const answer = deferred();
    server.lockAnswer = answer.promise;

    const run = orchestrator.run('prod', options(), never);
    await until(() => opener.opened.length === 3);
    answer.resolve();

    await expect(run).rejects.toMatchObject({ code: 'STATE.LOCKED' });
    expect(opener.opened.every((p) => p.closed === 1)).toBe(true);
    expect(opener.opened.flatMap((p) => [...p.configured, ...p.reads])).toEqual([]);
    expect(server.results).toEqual([]);
    expect(server.unlocks).toEqual([]);
    expect(server.finished).toEqual([expect.objectContaining({ status: 'failed' })]);
  });

  it('ends the providers it started when cancelled while the lock is asked for', async () => {
    const { server, opener, orchestrator } = setup();
    const answer = deferred();
    server.lockAnswer = answer.promise;
    const cancel = new AbortController();

    const run = orchestrator.run('prod', options(), cancel.signal);
    await until(() => opener.opened.length === 3);
    cancel.abort();
    answer.resolve();
    const report = await run;

    expect(report.status).toBe('cancelled');
    expect(report.checked).toBe(0);
    expect(opener.opened.every((p) => p.closed === 1 && p.reads.length === 0)).toBe(true);
    expect(server.committed).toBeUndefined();
    expect(server.unlocks).toHaveLength(1);
  });

  it('always unlocks, also when the run fails half-way', async () => {
    const { server, orchestrator } = setup();
    server.getStateError = new Error('connection reset');

    await expect(orchestrator.run('prod', options(), never)).rejects.toThrow('connection reset');
    expect(server.unlocks).toHaveLength(1);
    expect(server.finished).toEqual([
      expect.objectContaining({ status: 'failed', errorSummary: 'connection reset' }),
    ]);
  });

  it('explains a commit refused because the state moved, and still unlocks', async () => {
    const { server, orchestrator } = setup();
    server.finishError = new DomainError('REFRESH.STATE_CHANGED', 'state moved');

    await expect(orchestrator.run('prod', options(), never)).rejects.toThrow(
      /changed while the refresh ran; nothing was committed/,
    );
    expect(server.unlocks).toHaveLength(1);
  });

  it('sends results in batches, every instance exactly once', async () => {
    const { server, orchestrator } = setup(standardDocument(), inSync(), { batchSize: 3 });

    await orchestrator.run('prod', options(), never);

    expect(server.results.map((b) => b.length)).toEqual([3, 1]);
    expect(server.allResults.map((r) => r.address).sort()).toEqual([
      'aws_s3_bucket.logs[0]',
      'aws_s3_bucket.logs[1]',
      'aws_s3_bucket.west',
      'random_id.x',
    ]);
  });

  it('sends results in document order, whichever read finishes first', async () => {
    const behaviours = inSync();
    // The first instances answer last.
    const order = ['b1', 'b2', 'w1', 'r1'];
    for (const source of [AWS, RANDOM]) {
      behaviours[source].readDelayFor = (id) => 4 * (order.length - order.indexOf(id));
    }
    const { server, orchestrator } = setup(standardDocument(), behaviours, { batchSize: 3 });

    await orchestrator.run('prod', options({ parallelism: 4 }), never);

    expect(server.results.map((b) => b.map((r) => r.address))).toEqual([
      ['aws_s3_bucket.logs[0]', 'aws_s3_bucket.logs[1]', 'aws_s3_bucket.west'],
      ['random_id.x'],
    ]);
  });

  it('stamps the lock and times the run with the host clock', async () => {
    const { server, orchestrator, clock } = setup();
    server.onFinish = () => (clock.at += 2_500);

    const report = await orchestrator.run('prod', options(), never);

    expect(server.locks[0].Created).toBe('2026-11-30T08:00:00.000Z');
    expect(report.durationMs).toBe(2_500);
  });

  it('refreshes as many provider groups at once as the host has CPUs, unless told', async () => {
    const slow = () => {
      const b = inSync();
      for (const source of [AWS, RANDOM]) b[source].readDelayMs = 15;
      return b;
    };
    const unbounded = options({ concurrency: undefined, parallelism: 1 });

    const one = setup(standardDocument(), slow(), { cpuCount: 1 });
    await one.orchestrator.run('prod', unbounded, never);
    expect(one.opener.tracker.maxActive).toBe(1);

    const three = setup(standardDocument(), slow(), { cpuCount: 3 });
    await three.orchestrator.run('prod', unbounded, never);
    expect(three.opener.tracker.maxActive).toBe(3);

    const told = setup(standardDocument(), slow(), { cpuCount: 3 });
    await told.orchestrator.run('prod', options({ concurrency: 1, parallelism: 1 }), never);
    expect(told.opener.tracker.maxActive).toBe(1);
  });

  it('reports progress for every instance', async () => {
    const { orchestrator } = setup();
    const seen: number[] = [];

    await orchestrator.run('prod', options({ onProgress: (p) => seen.push(p.done) }), never);

    expect(seen).toEqual([0, 1, 2, 3, 4]);
  });
});

// ---------------------------------------------------------------- provider pools

/** 60 aws and 25 random instances: drifted, gone and failing ones among them. */
function pooledFixture(): { doc: StateDocumentV4; behaviours: Record<string, ProviderBehaviour> } {
  const ids = (prefix: string, n: number) =>
    Array.from({ length: n }, (_, i) => `${prefix}${String(i).padStart(2, '0')}`);
  const buckets = ids('b', 60);
  const randoms = ids('r', 25);
  const remote = (list: string[]) =>
    new Map<string, Remote>(
      list.map((id, i): [string, Remote] => [
        id,
        i % 17 === 5
          ? null
          : i % 13 === 3
            ? new Error(`AccessDenied reading ${id}`)
            : { id, acl: i % 7 === 2 ? 'public-read' : 'private' },
      ]),
    );
  // A different delay per object, so reads finish in an order of their own.
  const delay = (id: string) => (id.charCodeAt(1) * 7 + Number(id.slice(1)) * 13) % 9;
  return {
    doc: documentOf([
      resource(
        'aws_s3_bucket',
        'b',
        awsDefault,
        buckets.map((id) => ({ id, attrs: { acl: 'private' } })),
      ),
      resource(
        'random_id',
        'r',
        random,
        randoms.map((id) => ({ id, attrs: { acl: 'private' } })),
      ),
    ]),
    behaviours: {
      [AWS]: {
        remote: remote(buckets),
        schemaVersions: { aws_s3_bucket: 0 },
        readDelayFor: delay,
      },
      [RANDOM]: { remote: remote(randoms), schemaVersions: { random_id: 0 }, readDelayFor: delay },
    },
  };
}

describe('RefreshOrchestrator with a pool of provider processes', () => {
  it('records the same results, report and document with a pool of 1 as with a pool of 4', async () => {
    const runWith = async (pool: number) => {
      const { doc, behaviours } = pooledFixture();
      const { server, opener, orchestrator } = setup(doc, behaviours, { batchSize: 7 });
      const report = await orchestrator.run('prod', options({ pool, parallelism: 3 }), never);
      return { server, opener, report };
    };

    const one = await runWith(1);
    const four = await runWith(4);

    // The pool is real: four processes per group, each configured once, each reading.
    expect(one.opener.of(AWS)).toHaveLength(1);
    expect(four.opener.of(AWS)).toHaveLength(4);
    expect(four.opener.of(RANDOM)).toHaveLength(4);
    for (const p of four.opener.opened) {
      expect(p.configured).toHaveLength(1);
      expect(p.reads.length).toBeGreaterThan(0);
      expect(p.closed).toBe(1);
    }
    expect(four.opener.tracker.maxPerGroup).toBeGreaterThan(3);
    // What is recorded (every batch, in order), reported and committed is the same.
    expect(four.server.results).toEqual(one.server.results);
    expect(four.server.finished).toEqual(one.server.finished);
    expect(four.report).toEqual(one.report);
    expect(one.report).toMatchObject({ checked: 85, failed: 7, gone: 6, changed: 11 });
    expect(one.server.allResults.map((r) => r.address)).toEqual(
      parseStateDocument(JSON.stringify(pooledFixture().doc)).resources.flatMap((r) =>
        r.instances.map((_, i) => `${r.type}.${r.name}[${i}]`),
      ),
    );
  });

  it('fails the unread instances of a group whose pooled process crashes, naming it, and commits nothing', async () => {
    const runWith = async (pool: number) => {
      const { doc, behaviours } = pooledFixture();
      for (const b of Object.values(behaviours))
        b.remote.forEach((_, id) => b.remote.set(id, { id, acl: 'private' }));
      // The process that reads b20 dies on it.
      behaviours[AWS].onRead = (p, id) => {
        if (id === 'b20') p.crash('exited (code 2, signal null)');
      };
      const { server, opener, orchestrator } = setup(doc, behaviours, { batchSize: 7 });
      const report = await orchestrator.run('prod', options({ pool, parallelism: 2 }), never);
      return { server, opener, report };
    };

    for (const pool of [1, 3]) {
      const { server, opener, report } = await runWith(pool);
      const results = server.allResults;
      const who = pool > 1 ? /provider process \d of 3 exited \(code 2, signal null\)/ : /exited/;
      expect(report.status).toBe('failed');
      expect(server.finished).toEqual([
        expect.objectContaining({ status: 'failed', document: undefined }),
      ]);
      // Every instance once; the other group is untouched by the crash.
      expect(new Set(results.map((r) => r.address)).size).toBe(85);
      expect(results).toHaveLength(85);
      expect(results.filter((r) => r.address.startsWith('random_id.'))).toEqual(
        results
          .filter((r) => r.address.startsWith('random_id.'))
          .map((r) => expect.objectContaining({ address: r.address, outcome: 'unchanged' })),
      );
      // Only reads a live process answered count as read; b20 and whatever it left unread failed.
      const answered = new Set(
        opener
          .of(AWS)
          .flatMap((p) => p.reads.map((r) => String(r.current.attributes.id)))
          .filter((id) => id !== 'b20'),
      );
      for (const r of results.filter((x) => x.address.startsWith('aws_s3_bucket.'))) {
        const id = `b${r.address.slice('aws_s3_bucket.b['.length, -1).padStart(2, '0')}`;
        if (r.outcome === 'unchanged') expect(answered.has(id)).toBe(true);
        else {
          expect(r.outcome).toBe('failed');
          expect(r.error).toMatch(pool > 1 ? who : /exited/);
        }
      }
      expect(results.find((r) => r.address === 'aws_s3_bucket.b[20]')?.outcome).toBe('failed');
      expect(report.failures.length).toBeGreaterThan(0);
      for (const p of opener.opened) expect(p.closed).toBe(1);
      // The healthy pool members were stopped, not left reading the rest.
      if (pool > 1) expect(report.failed).toBeGreaterThan(1);
    }
  });

  it('pools by CPU count less one (kl keeps a core) by default, within bounds, and as asked when told', () => {
    expect(poolSize(5_000, undefined, 1)).toBe(1);
    expect(poolSize(5_000, undefined, 2)).toBe(1);
    expect(poolSize(5_000, undefined, 3)).toBe(2);
    expect(poolSize(5_000, undefined, 16)).toBe(MAX_DEFAULT_POOL);
    expect(poolSize(MIN_READS_PER_PROCESS, undefined, 8)).toBe(1);
    expect(poolSize(MIN_READS_PER_PROCESS + 1, undefined, 8)).toBe(2);
    expect(poolSize(3, undefined, 8)).toBe(1);
    expect(poolSize(5_000, 1, 8)).toBe(1);
    expect(poolSize(5_000, 12, 2)).toBe(12);
    expect(poolSize(3, 12, 2)).toBe(3);
  });
});

async function waitFor(condition: () => boolean, timeoutMs = 2_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}
