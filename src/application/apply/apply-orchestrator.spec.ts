import { KL_PLAN_FORMAT, KlPlan } from '../../domain/apply/kl-plan';
import { DomainError } from '../../domain/shared/domain-error';
import { StateDocumentV4 } from '../../domain/terraform';
import { ApplyEvent, ApplyOrchestrator } from './apply-orchestrator';
import {
  AcquireOutcome,
  AcquireRequest,
  ApplyServerPort,
  CommitRequest,
  EngineCandidates,
  EngineScope,
  FinishRequest,
  Holder,
  RESERVATION_EXPIRED,
} from './apply-server.port';
import {
  ApplyResult,
  ConfigReader,
  TerraformWorkspace,
  TerraformWorkspaces,
  WorkspaceSpec,
} from './terraform-workspace.port';

const trunk: StateDocumentV4 = {
  version: 4,
  terraform_version: '1.11.4',
  serial: 5,
  lineage: 'L',
  outputs: { a: { value: 'a-v1', type: 'string' } },
  resources: [
    {
      mode: 'managed',
      type: 'terraform_data',
      name: 'a',
      provider: 'provider["terraform.io/builtin/terraform"]',
      instances: [{ schema_version: 0, attributes: { id: '1', input: 'a-v1' } }],
    },
    {
      mode: 'managed',
      type: 'terraform_data',
      name: 'b',
      provider: 'provider["terraform.io/builtin/terraform"]',
      instances: [{ schema_version: 0, attributes: { id: '2', input: 'b-v1' } }],
    },
  ],
};

function withA(input: string, extra: (d: StateDocumentV4) => void = () => undefined): string {
  const d = JSON.parse(JSON.stringify(trunk)) as StateDocumentV4;
  d.serial += 1;
  d.resources[0].instances[0].attributes = { id: '9', input };
  d.outputs.a = { value: input, type: 'string' };
  extra(d);
  return JSON.stringify(d);
}

const plan: KlPlan = {
  format: KL_PLAN_FORMAT,
  createdAt: '2026-11-30T12:00:00Z',
  server: 'http://kld',
  state: 's',
  baseVersion: 3,
  baseSerial: 5,
  lineage: 'L',
  terraformVersion: '1.11.4',
  configDir: '/cfg',
  files: null,
  targets: [],
  refresh: true,
  variables: {},
  changes: [{ address: 'terraform_data.a', action: 'replace' }],
  writeSet: ['terraform_data.a'],
  readSet: [],
  outputWrites: ['a'],
  footprint: null,
  reservations: { write: ['terraform_data.a', 'output.a'], read: [] },
  counts: { create: 0, update: 0, replace: 1, delete: 0, forget: 0 },
  summary: '0 to create, 0 to update, 1 to replace, 0 to delete.',
  lane: 'full',
  laneReasons: [],
  scope: null,
};

const replanOf = (changes: [string, string[]][]) => ({
  format_version: '1.2',
  terraform_version: '1.11.4',
  resource_changes: changes.map(([address, actions]) => ({
    address,
    mode: 'managed',
    change: { actions },
  })),
  configuration: { root_module: {} },
});

const holder: Holder = {
  glob: 'terraform_data.a',
  mode: 'write',
  actor: 'alice',
  runId: 'r0',
  lockId: '',
  kind: 'apply',
  acquiredAt: '2026-11-30T12:00:00Z',
  expiresAt: '2026-11-30T12:15:00Z',
};

class FakeServer implements ApplyServerPort {
  acquisitions: AcquireOutcome[] = [];
  acquired: AcquireRequest[] = [];
  commits: CommitRequest[] = [];
  finishes: FinishRequest[] = [];
  heartbeats = 0;
  heartbeatError: DomainError | null = null;
  /** What was read: `trunk`, or `slice` with its candidates. */
  reads: string[] = [];
  offer: { protocolVersion: number; operations: string[] } | null = {
    protocolVersion: 1,
    operations: ['scope', 'slice', 'runs', 'delta-commit', 'scope-slice'],
  };
  /** The scope answers, in order; the last one answers every later request. */
  scopes: EngineScope[] = [];

  async trunk() {
    this.reads.push('trunk');
    return { document: trunk, version: 4 };
  }
  async engineOffer() {
    return this.offer;
  }
  async engineInstanceCount() {
    return 20_008;
  }
  async expandScope(
    _state: string,
    candidates: EngineCandidates,
    options?: { withSlice?: boolean },
  ): Promise<EngineScope> {
    this.reads.push(`scope${options?.withSlice ? '+slice' : ''} ${JSON.stringify(candidates)}`);
    const next = this.scopes.length > 1 ? this.scopes.shift() : this.scopes[0];
    if (next === undefined) throw new Error('no scope answer queued');
    // Like kld: the slice comes with the scope only when asked and proven.
    return options?.withSlice && next.provablySafe
      ? { ...next, slice: this.sliceOf(candidates) }
      : next;
  }
  async slice(_state: string, candidates: EngineCandidates) {
    this.reads.push(`slice ${JSON.stringify(candidates)}`);
    return this.sliceOf(candidates);
  }
  private sliceOf(candidates: EngineCandidates) {
    const wanted = new Set(candidates.addresses);
    const document = {
      ...trunk,
      resources: trunk.resources.filter((r) => wanted.has(`${r.type}.${r.name}`)),
    };
    return { document, version: 4, bytes: JSON.stringify(document).length };
  }
  async acquire(_state: string, request: AcquireRequest): Promise<AcquireOutcome> {
    this.acquired.push(request);
    return (
      this.acquisitions.shift() ?? {
        status: 'acquired',
        runId: 'run-1',
        reservations: [],
        expiresAt: '2026-11-30T12:15:00Z',
      }
    );
  }
  async heartbeat() {
    this.heartbeats++;
    if (this.heartbeatError) throw this.heartbeatError;
    return { expiresAt: '' };
  }
  async commit(_state: string, _run: string, request: CommitRequest) {
    this.commits.push(request);
    return { version: 5, serial: 6 };
  }
  async finish(_state: string, _run: string, request: FinishRequest) {
    this.finishes.push(request);
  }
}

class FakeWorkspace implements TerraformWorkspace {
  readonly dir = '/tmp/fake';
  applied = false;
  disposed = false;
  constructor(
    private readonly replan: unknown,
    private readonly result: { ok: boolean; state: string | null; waitForAbort?: boolean },
  ) {}
  async init() {}
  async plan() {
    return this.replan;
  }
  async apply(signal?: AbortSignal): Promise<ApplyResult> {
    this.applied = true;
    if (this.result.waitForAbort) {
      await new Promise<void>((resolve) => signal?.addEventListener('abort', () => resolve()));
      return {
        ok: false,
        interrupted: true,
        command: 'terraform apply',
        code: 1,
        output: 'Interrupt received',
      };
    }
    return this.result.ok
      ? { ok: true, output: '' }
      : {
          ok: false,
          interrupted: false,
          command: 'terraform apply',
          code: 1,
          output: '│ Error: local-exec provisioner error\n│ \n│ exit status 3\n',
        };
  }
  async stateText() {
    return this.result.state;
  }
  readonly initialisations = 0;
  async moduleDirs() {
    return new Map<string, string>();
  }
  async dispose() {
    this.disposed = true;
  }
}

const clock = { now: () => new Date() };
const reader: ConfigReader = { readModule: async () => ({ hcl: [], json: new Map() }) };

const A_TF = 'resource "terraform_data" "a" {\n  input = "a-v2"\n}\n';
/** A configuration of one file, a.tf, declaring terraform_data.a. */
const oneFile: ConfigReader = {
  readModule: async () => ({
    hcl: [
      {
        name: 'a.tf',
        text: A_TF,
        units: [
          {
            kind: 'resource',
            key: 'terraform_data.a',
            range: { start: 0, end: A_TF.length },
            references: [],
            cut: [],
          },
        ],
      },
    ],
    json: new Map(),
  }),
};

function setup(workspace: FakeWorkspace, planned: KlPlan = plan, configReader = reader) {
  const server = new FakeServer();
  const opened: (WorkspaceSpec & { state: StateDocumentV4 })[] = [];
  const workspaces: TerraformWorkspaces = {
    open: async (configDir, contents) => {
      const c = await contents;
      opened.push({ configDir, ...c, state: await c.state });
      return workspace;
    },
  };
  const events: ApplyEvent[] = [];
  const orchestrator = new ApplyOrchestrator(server, configReader, workspaces, clock, {
    uuid: () => 'run-1',
  });
  const run = (
    options: { waitMs?: number | null; leaseSeconds?: number } = {},
    signal = new AbortController().signal,
  ) =>
    orchestrator.apply(
      planned,
      {
        leaseSeconds: options.leaseSeconds ?? 900,
        waitMs: options.waitMs ?? null,
        waitPollMs: 5,
        waitStatusEveryMs: 0,
        onEvent: (e) => events.push(e),
      },
      signal,
    );
  return { server, opened, events, run };
}

describe('ApplyOrchestrator', () => {
  it('commits only the write set and the outputs it may change, on a slice with the planned variables', async () => {
    const ws = new FakeWorkspace(
      replanOf([
        ['terraform_data.a', ['delete', 'create']],
        ['terraform_data.b', ['no-op']],
      ]),
      {
        ok: true,
        state: withA('a-v2'),
      },
    );
    const { server, opened, run } = setup(ws);
    const outcome = await run();
    expect(outcome).toMatchObject({ status: 'committed', runId: 'run-1', version: 5, serial: 6 });
    expect(opened[0]).toMatchObject({ configDir: '/cfg', variables: {}, state: trunk });
    expect(server.commits).toHaveLength(1);
    const commit = server.commits[0];
    expect(commit.upserts.map((u) => u.address)).toEqual(['terraform_data.a']);
    expect(commit.upserts[0].instance.attributes).toEqual({ id: '9', input: 'a-v2' });
    expect(commit.outputs).toEqual({ set: { a: { value: 'a-v2', type: 'string' } }, remove: [] });
    expect(commit).toMatchObject({ baseVersion: 3, counters: { add: 1, change: 0, destroy: 1 } });
    expect(server.finishes).toEqual([]);
    expect(ws.disposed).toBe(true);
  });

  it('runs on the full-trunk lane when the plan says so: the run, the trunk, the commit', async () => {
    const ws = new FakeWorkspace(replanOf([['terraform_data.a', ['delete', 'create']]]), {
      ok: true,
      state: withA('a-v2'),
    });
    const { server, run } = setup(ws);
    expect(await run()).toMatchObject({ status: 'committed', lane: 'full' });
    expect(server.acquired[0].lane).toBe('full');
    expect(server.reads).toEqual(['trunk']);
    expect(server.commits[0].lane).toBe('full');
  });

  const trusted: KlPlan = {
    ...plan,
    files: ['a.tf'],
    footprint: ['terraform_data.a'],
    lane: 'state-engine',
    scope: { provablySafe: true, unresolved: [], closure: [], slice: null },
    reservations: { write: ['terraform_data.a'], read: [] },
  };
  const provedA: EngineScope = {
    version: 4,
    scope: [{ address: 'terraform_data.a', instances: ['terraform_data.a'] }],
    closure: [],
    unresolved: [],
    reservations: { write: ['terraform_data.a'], read: [] },
    provablySafe: true,
    reasons: [],
  };

  it('on the trusted lane, a scope the server can no longer prove at apply time is refused: nothing applied', async () => {
    const ws = new FakeWorkspace(replanOf([['terraform_data.a', ['delete', 'create']]]), {
      ok: true,
      state: withA('a-v2'),
    });
    const { server, opened, run } = setup(ws, trusted, oneFile);
    server.scopes.push({
      ...provedA,
      provablySafe: false,
      reasons: ['terraform_data.a depends on terraform_data.gone, which is not in this state'],
    });
    const outcome = await run();
    expect(outcome).toMatchObject({ status: 'failed' });
    expect((outcome as { message: string }).message).toMatch(
      /can no longer prove the scope safe \(terraform_data.a depends on terraform_data.gone.*\): nothing applied; run kl plan again/,
    );
    expect(opened).toEqual([]);
    expect(server.commits).toEqual([]);
    expect(server.finishes).toEqual([expect.objectContaining({ status: 'failed' })]);
    expect(server.reads.some((r) => r.startsWith('slice'))).toBe(false);
  });

  it('on the trusted lane: the run is a state-engine run, terraform works on the server slice (the trunk is never read), the commit is the engine delta', async () => {
    const ws = new FakeWorkspace(replanOf([['terraform_data.a', ['delete', 'create']]]), {
      ok: true,
      state: withA('a-v2', (d) => {
        d.resources = d.resources.filter((r) => r.name === 'a');
      }),
    });
    const { server, opened, run, events } = setup(ws, trusted, oneFile);
    server.scopes.push(provedA);
    expect(await run()).toMatchObject({ status: 'committed', lane: 'state-engine' });
    expect(server.acquired[0].lane).toBe('state-engine');
    expect(events.find((e) => e.type === 'acquired')).toMatchObject({ lane: 'state-engine' });
    // The scope is proved again once the run holds its reservations, its slice in the answer.
    expect(server.reads).toEqual([
      'scope+slice {"addresses":["terraform_data.a"],"modulePrefixes":[]}',
    ]);
    expect(opened[0].state.resources.map((r) => r.name)).toEqual(['a']);
    expect(server.commits).toEqual([
      expect.objectContaining({ lane: 'state-engine', deletes: [] }),
    ]);
    expect(server.commits[0].upserts.map((u) => u.address)).toEqual(['terraform_data.a']);
  });

  it('on the trusted lane with a server from before the combined exchange: the scope, then the slice', async () => {
    const ws = new FakeWorkspace(replanOf([['terraform_data.a', ['delete', 'create']]]), {
      ok: true,
      state: withA('a-v2', (d) => {
        d.resources = d.resources.filter((r) => r.name === 'a');
      }),
    });
    const { server, opened, run } = setup(ws, trusted, oneFile);
    server.offer = { protocolVersion: 1, operations: ['scope', 'slice', 'runs', 'delta-commit'] };
    server.scopes.push(provedA);
    expect(await run()).toMatchObject({ status: 'committed', lane: 'state-engine' });
    // The answer asked beside the offer is dropped; the offer says how to ask.
    expect(server.reads).toEqual([
      'scope+slice {"addresses":["terraform_data.a"],"modulePrefixes":[]}',
      'scope {"addresses":["terraform_data.a"],"modulePrefixes":[]}',
      'slice {"addresses":["terraform_data.a"],"modulePrefixes":[]}',
    ]);
    expect(opened[0].state.resources.map((r) => r.name)).toEqual(['a']);
  });

  it('reserves and runs nothing for a plan without changes', async () => {
    const ws = new FakeWorkspace(replanOf([]), { ok: true, state: null });
    const server = new FakeServer();
    let opened = 0;
    const orchestrator = new ApplyOrchestrator(
      server,
      reader,
      {
        open: async () => {
          opened++;
          return ws;
        },
      },
      clock,
      { uuid: () => 'run-1' },
    );
    const outcome = await orchestrator.apply(
      {
        ...plan,
        changes: [],
        writeSet: [],
        outputWrites: [],
        reservations: { write: [], read: [] },
      },
      { leaseSeconds: 60, waitMs: null },
      new AbortController().signal,
    );
    expect(outcome).toEqual({ status: 'unchanged' });
    expect(opened).toBe(0);
    server.acquisitions.push({ status: 'conflict', holders: [] });
    expect(server.acquisitions).toHaveLength(1); // never asked
  });

  it('ends at once on a conflict without --wait, before any terraform runs', async () => {
    const ws = new FakeWorkspace(replanOf([]), { ok: true, state: null });
    const { server, opened, run } = setup(ws);
    server.acquisitions.push({ status: 'conflict', holders: [holder] });
    expect(await run()).toEqual({ status: 'conflict', holders: [holder] });
    expect(opened).toHaveLength(0);
  });

  it('with --wait reports the holder and proceeds once the reservations are free', async () => {
    const ws = new FakeWorkspace(replanOf([['terraform_data.a', ['delete', 'create']]]), {
      ok: true,
      state: withA('a-v2'),
    });
    const { server, events, run } = setup(ws);
    server.acquisitions.push(
      { status: 'conflict', holders: [holder] },
      { status: 'conflict', holders: [holder] },
    );
    const outcome = await run({ waitMs: 10_000 });
    expect(outcome.status).toBe('committed');
    expect(events.filter((e) => e.type === 'waiting')).toHaveLength(2);
    expect(events.find((e) => e.type === 'waiting')).toMatchObject({ holders: [holder] });
  });

  it('passes a stale answer on, before any terraform runs', async () => {
    const ws = new FakeWorkspace(replanOf([]), { ok: true, state: null });
    const { server, opened, run } = setup(ws);
    server.acquisitions.push({
      status: 'stale',
      addresses: [{ address: 'terraform_data.a', changedInVersion: 4 }],
    });
    expect(await run({ waitMs: 10_000 })).toMatchObject({ status: 'stale' });
    expect(opened).toHaveLength(0);
  });

  it('stops before applying when the re-plan writes anything else, and ends the run', async () => {
    const ws = new FakeWorkspace(
      replanOf([
        ['terraform_data.a', ['delete', 'create']],
        ['terraform_data.b', ['update']],
      ]),
      { ok: true, state: null },
    );
    const { server, run } = setup(ws);
    const outcome = await run();
    expect(outcome).toMatchObject({ status: 'mismatch' });
    expect(outcome.status === 'mismatch' && outcome.message).toContain(
      'terraform_data.b would update, not planned',
    );
    expect(ws.applied).toBe(false);
    expect(server.commits).toEqual([]);
    expect(server.finishes).toEqual([expect.objectContaining({ status: 'failed' })]);
  });

  it('commits nothing when terraform changed anything outside the write set, and keeps its state', async () => {
    const state = withA('a-v2', (d) => {
      d.resources[1].instances[0].attributes = { id: '2', input: 'b-drifted' };
    });
    const ws = new FakeWorkspace(replanOf([['terraform_data.a', ['delete', 'create']]]), {
      ok: true,
      state,
    });
    const { server, run } = setup(ws);
    const outcome = await run();
    expect(outcome).toMatchObject({ status: 'failed', outputState: state, keptOnServer: true });
    expect(outcome.status === 'failed' && outcome.message).toContain(
      'terraform_data.b (changed outside the write set)',
    );
    expect(server.commits).toEqual([]);
    expect(server.finishes).toEqual([
      { status: 'failed', errorSummary: expect.any(String), outputState: state },
    ]);
  });

  it('commits nothing when terraform apply fails, and keeps what terraform wrote with the run', async () => {
    const state = withA('a-partial');
    const ws = new FakeWorkspace(replanOf([['terraform_data.a', ['delete', 'create']]]), {
      ok: false,
      state,
    });
    const { server, run } = setup(ws);
    const outcome = await run();
    expect(outcome).toMatchObject({ status: 'failed', outputState: state, keptOnServer: true });
    expect(outcome.status === 'failed' && outcome.message).toBe(
      'terraform apply failed: Error: local-exec provisioner error exit status 3',
    );
    expect(server.commits).toEqual([]);
    expect(server.finishes[0]).toMatchObject({ status: 'failed', outputState: state });
  });

  it('ends the run aborted when the caller aborts mid-apply', async () => {
    const ws = new FakeWorkspace(replanOf([['terraform_data.a', ['delete', 'create']]]), {
      ok: false,
      state: withA('a-partial'),
      waitForAbort: true,
    });
    const { server, run, events } = setup(ws);
    const abort = new AbortController();
    const pending = run({}, abort.signal);
    while (!events.some((e) => e.type === 'applying')) await new Promise((r) => setTimeout(r, 5));
    abort.abort();
    expect(await pending).toMatchObject({ status: 'aborted', runId: 'run-1' });
    expect(server.finishes[0]).toMatchObject({ status: 'aborted' });
    expect(server.commits).toEqual([]);
  });

  it('stops terraform and commits nothing when the heartbeat learns the reservations were lost', async () => {
    jest.useFakeTimers({ doNotFake: ['setImmediate', 'nextTick'] });
    try {
      const ws = new FakeWorkspace(replanOf([['terraform_data.a', ['delete', 'create']]]), {
        ok: false,
        state: withA('a-partial'),
        waitForAbort: true,
      });
      const { server, run, events } = setup(ws);
      server.heartbeatError = new DomainError(RESERVATION_EXPIRED, 'reclaimed by bob');
      const pending = run({ leaseSeconds: 3 });
      while (!events.some((e) => e.type === 'applying')) await jest.advanceTimersByTimeAsync(10);
      await jest.advanceTimersByTimeAsync(1_100);
      const outcome = await pending;
      expect(outcome).toMatchObject({ status: 'failed' });
      expect(outcome.status === 'failed' && outcome.message).toContain(
        "the run's reservations were lost",
      );
      expect(server.heartbeats).toBe(1);
      expect(server.commits).toEqual([]);
    } finally {
      jest.useRealTimers();
    }
  });
});
