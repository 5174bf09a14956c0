import { pick, rng } from '../../../test/support/random-globs';
import { DomainError } from '../shared/domain-error';
import { InstanceObjectV4, ResourceV4, StateDocumentV4 } from '../terraform/state-document';
import { flattenInstances, instanceHash, ResourceDescriptor } from '../terraform/state-instances';
import { LockInfo } from './lock-info';
import { DeltaUpsert, StateCommand } from './state.commands';
import { decide } from './state.decider';
import { StateEvent } from './state.events';
import { evolve } from './state.evolve';
import { initialState, StateAggregate } from './state.model';
import { fromSnapshot, toSnapshot } from './state.snapshot';
import { fuzzSeeds, seedRange } from '../../../test/support/seeded-random';

/**
 * Many writers on one State, in long random interleavings: terraform locks
 * and whole-document writes, apply runs (and state-engine runs) reserving
 * globs, heartbeats, row-level commits inside and outside their write sets,
 * releases, the clock running leases out, deletes. Every command goes
 * through the real decide/evolve; a reference model written here (glob
 * coverage from a hand-made table, not the glob code) predicts whether it
 * is granted or refused, and what the state then holds. After each step the
 * rules a user relies on are checked: no two holders in each other's way,
 * a run writing only what it reserved, refusals changing nothing, and the
 * state the same when folded from a snapshot plus the tail, or from scratch.
 *
 * A failure prints its seed and the steps taken, each with its outcome;
 * `KL_FUZZ_SEED=<seed>` replays that seed alone, `KL_FUZZ_SEED=1000-1999` runs
 * others (`STEPS=<n>` longer histories).
 */

const NAME = 'shared';
const T0 = Date.parse('2026-12-01T09:00:00.000Z');
const PROVIDER = 'provider["registry.terraform.io/hashicorp/aws"]';
const SEEDS = fuzzSeeds(seedRange(1, 300));
const STEPS = Number(process.env.STEPS ?? 60);

type Mode = 'read' | 'write';

const resource = (
  module: string,
  mode: 'managed' | 'data',
  type: string,
  name: string,
  each: 'list' | null = null,
): ResourceDescriptor => ({ module, mode, type, name, provider: PROVIDER, each });

const RESOURCES = {
  vpc: resource('', 'managed', 'aws_vpc', 'main'),
  web: resource('module.web', 'managed', 'aws_instance', 'a', 'list'),
  webAmi: resource('module.web', 'data', 'aws_ami', 'x'),
  db: resource('module.db', 'managed', 'aws_db', 'main'),
  ami: resource('', 'data', 'aws_ami', 'base'),
  appK: resource('module.app["k"]', 'managed', 'aws_s3', 'b'),
  appJ: resource('module.app["j"]', 'managed', 'aws_s3', 'b'),
};

/** The addresses the runs fight over: keyed and unkeyed, in modules and not, data sources. */
const UNIVERSE: { address: string; resource: ResourceDescriptor; key?: number }[] = [
  { address: 'aws_vpc.main', resource: RESOURCES.vpc },
  { address: 'module.web.aws_instance.a[0]', resource: RESOURCES.web, key: 0 },
  { address: 'module.web.aws_instance.a[1]', resource: RESOURCES.web, key: 1 },
  { address: 'module.web.data.aws_ami.x', resource: RESOURCES.webAmi },
  { address: 'module.db.aws_db.main', resource: RESOURCES.db },
  { address: 'data.aws_ami.base', resource: RESOURCES.ami },
  { address: 'module.app["k"].aws_s3.b', resource: RESOURCES.appK },
  { address: 'module.app["j"].aws_s3.b', resource: RESOURCES.appJ },
];
const ADDRESSES = UNIVERSE.map((u) => u.address);

/**
 * What each glob covers, written out by hand (the reference, not the glob
 * code). Two globs of this list that meet always share an address of the
 * universe, so "meet" is "share an address" here.
 */
const COVERS: Record<string, string[]> = {
  '*': ADDRESSES,
  'module.web.*': [
    'module.web.aws_instance.a[0]',
    'module.web.aws_instance.a[1]',
    'module.web.data.aws_ami.x',
  ],
  'module.web.aws_instance.a': ['module.web.aws_instance.a[0]', 'module.web.aws_instance.a[1]'],
  'module.web.aws_instance.a[0]': ['module.web.aws_instance.a[0]'],
  'module.web.aws_instance.a[1]': ['module.web.aws_instance.a[1]'],
  'module.web.data.aws_ami.x': ['module.web.data.aws_ami.x'],
  'module.db.*': ['module.db.aws_db.main'],
  'aws_vpc.main': ['aws_vpc.main'],
  'data.aws_ami.base': ['data.aws_ami.base'],
  'module.app.*': ['module.app["k"].aws_s3.b', 'module.app["j"].aws_s3.b'],
  'module.app["k"].*': ['module.app["k"].aws_s3.b'],
  'module.app["j"].aws_s3.b': ['module.app["j"].aws_s3.b'],
};
const GLOBS = Object.keys(COVERS).filter((g) => g !== '*');

const covers = (glob: string, address: string) => COVERS[glob].includes(address);
const meet = (a: string, b: string) => COVERS[a].some((x) => COVERS[b].includes(x));

interface Want {
  glob: string;
  mode: Mode;
}
const clash = (a: Want, b: Want) =>
  (a.mode === 'write' || b.mode === 'write') && meet(a.glob, b.glob);

// ---------------------------------------------------------------- the model

interface ModelRun {
  wants: Want[];
  base: number;
  expiresAt: number;
  engine: boolean;
}

interface Model {
  status: 'missing' | 'active' | 'deleted';
  stateId: string | null;
  version: number;
  /** address → the value of its one attribute. */
  instances: Map<string, string>;
  changedIn: Map<string, number>;
  locks: Map<string, Mode>;
  runs: Map<string, ModelRun>;
  /** The last commit, which a retry of it (same checksum…) finds done already. */
  head: Head | null;
}

interface Head {
  checksum: string;
  source: string;
  runId: string | null;
  /** The one terraform lock held when it was committed. */
  lockId: string | null;
}

const emptyModel = (): Model => ({
  status: 'missing',
  stateId: null,
  version: 0,
  instances: new Map(),
  changedIn: new Map(),
  locks: new Map(),
  runs: new Map(),
  head: null,
});

function cloneModel(m: Model): Model {
  return {
    ...m,
    instances: new Map(m.instances),
    changedIn: new Map(m.changedIn),
    locks: new Map(m.locks),
    runs: new Map(m.runs),
  };
}

/** A state brought into being by a LOCK or a POST: nothing held, no version. */
function created(stateId: string): Model {
  return { ...emptyModel(), status: 'active', stateId };
}

/** A new version with these instances set (value) or removed (null). */
function committed(
  m: Model,
  changes: Map<string, string | null>,
  head: Omit<Head, 'lockId'>,
): void {
  m.version += 1;
  m.head = { ...head, lockId: m.locks.size === 1 ? [...m.locks.keys()][0] : null };
  for (const [address, value] of changes) {
    const before = m.instances.get(address);
    if (before === (value ?? undefined)) continue;
    if (value === null) m.instances.delete(address);
    else m.instances.set(address, value);
    m.changedIn.set(address, m.version);
  }
}

const isExpired = (run: ModelRun, now: number) => run.expiresAt <= now;

/**
 * The runs in the way of a request: those that meet it, split into live
 * ones (a refusal) and expired ones (reclaimed by a grant).
 */
function runsInTheWay(m: Model, meets: (run: ModelRun, id: string) => boolean, now: number) {
  const live: string[] = [];
  const expired: string[] = [];
  for (const [id, run] of m.runs) {
    if (!meets(run, id)) continue;
    (isExpired(run, now) ? expired : live).push(id);
  }
  return { live, expired };
}

/** What the model expects: a refusal with this code, or a grant leaving this model. */
type Outcome =
  | { refused: string; runHolder?: string[] }
  | { granted: Model; events?: 'none' | 'some'; writer?: string };

const refused = (code: string, runHolder?: string[]): Outcome => ({ refused: code, runHolder });

// ---------------------------------------------------------------- commands

interface Step {
  label: string;
  command: StateCommand;
  expect: (m: Model, now: number) => Outcome;
}

const ctx = (now: number, actor = 'alice') => ({
  actor,
  correlationId: 'corr',
  now: new Date(now).toISOString(),
});

function lockInfo(id: string, mode: Mode): LockInfo {
  return {
    ID: id,
    Operation: mode === 'read' ? 'OperationTypePlan' : 'OperationTypeApply',
    Info: '',
    Who: 'bob@laptop',
    Version: '1.11.4',
    Created: new Date(T0).toISOString(),
    Path: '',
  };
}

const instanceOf = (value: string, key?: number): InstanceObjectV4 => ({
  ...(key === undefined ? {} : { index_key: key }),
  schema_version: 0,
  attributes: { id: value },
  sensitive_attributes: [],
});

/** The document terraform would POST holding these instances. */
function documentOf(instances: Map<string, string>, serial: number): StateDocumentV4 {
  const resources: ResourceV4[] = [];
  for (const r of Object.values(RESOURCES)) {
    const held = UNIVERSE.filter((u) => u.resource === r && instances.has(u.address));
    if (held.length === 0) continue;
    resources.push({
      ...(r.module === '' ? {} : { module: r.module }),
      mode: r.mode,
      type: r.type,
      name: r.name,
      ...(r.each === null ? {} : { each: r.each }),
      provider: r.provider,
      instances: held.map((u) => instanceOf(instances.get(u.address)!, u.key)),
    });
  }
  return {
    version: 4,
    terraform_version: '1.11.4',
    serial,
    lineage: 'lineage-1',
    outputs: {},
    resources,
    check_results: null,
  };
}

function upsertOf(address: string, value: string): DeltaUpsert {
  const u = UNIVERSE.find((x) => x.address === address)!;
  return { address, resource: u.resource, instance: instanceOf(value, u.key) };
}

class Driver {
  private readonly r: () => number;
  private counter = 0;
  /** Every acquire made, to retry one. */
  private readonly acquires = new Map<string, StateCommand>();
  private lastCommit: Step | null = null;
  constructor(seed: number) {
    this.r = rng(seed);
  }

  private chance(p: number): boolean {
    return this.r() < p;
  }

  private next(prefix: string): string {
    this.counter += 1;
    return `${prefix}-${this.counter}`;
  }

  private someOf<T>(from: readonly T[], max: number): T[] {
    const n = 1 + Math.floor(this.r() * max);
    const out: T[] = [];
    for (let i = 0; i < n; i++) {
      const x = pick(this.r, from);
      if (!out.includes(x)) out.push(x);
    }
    return out;
  }

  /** A held lock most of the time, else one long gone. */
  private lockId(m: Model): string {
    const held = [...m.locks.keys()];
    return held.length > 0 && this.chance(0.85) ? pick(this.r, held) : 'gone-lock';
  }

  private runId(m: Model, writing = false): string {
    const all = [...m.runs.keys()];
    const writers = all.filter((id) => m.runs.get(id)!.wants.some((w) => w.mode === 'write'));
    const held = writing && writers.length > 0 && this.chance(0.8) ? writers : all;
    return held.length > 0 && this.chance(0.9) ? pick(this.r, held) : 'gone-run';
  }

  step(m: Model, now: number, first: boolean): Step {
    // Runs need a version to plan from: terraform writes the first one.
    if (first) return this.post(m, now, false);
    const steps: [weight: number, make: () => Step][] = [
      [10, () => this.lock(now, 'write')],
      [8, () => this.lock(now, 'read')],
      [3, () => this.relock(m, now)],
      [7, () => this.unlock(m, now)],
      [2, () => this.forceUnlock(m, now)],
      [8, () => this.post(m, now)],
      [2, () => this.remove(now)],
      [20, () => this.acquire(m, now)],
      [2, () => this.retryAcquire(m, now)],
      [8, () => this.renew(m, now)],
      [6, () => this.release(m, now)],
      [18, () => this.runCommit(m, now)],
      [6, () => this.otherCommit(m, now)],
      [4, () => this.retryCommit(m, now)],
    ];
    let x = this.r() * steps.reduce((sum, [w]) => sum + w, 0);
    for (const [w, make] of steps) {
      if (x < w) return make();
      x -= w;
    }
    return this.acquire(m, now);
  }

  private lock(now: number, mode: Mode): Step {
    return this.lockAs(now, this.next(mode === 'write' ? 'lock' : 'plan'), mode, 'bob@laptop');
  }

  /** A held lock asked again: terraform's retry (the same LockInfo), or another process reusing its ID. */
  private relock(m0: Model, now: number): Step {
    const held = [...m0.locks];
    if (held.length === 0) return this.lock(now, 'read');
    const [id, mode] = pick(this.r, held);
    return this.lockAs(now, id, mode, this.chance(0.5) ? 'bob@laptop' : 'eve@desktop');
  }

  private lockAs(now: number, id: string, mode: Mode, who: string): Step {
    const stateId = this.next('state');
    return {
      label: `LOCK ${id} (${mode}) by ${who}`,
      command: {
        type: 'LockState',
        data: { name: NAME, newStateId: stateId, lockInfo: { ...lockInfo(id, mode), Who: who } },
        metadata: ctx(now, 'bob'),
      },
      expect: (before, at) => {
        const m = before.status === 'active' ? cloneModel(before) : created(stateId);
        if (m.locks.has(id)) {
          return m.locks.get(id) === mode && who === 'bob@laptop'
            ? { granted: m, events: 'none' }
            : refused('STATE.LOCKED');
        }
        const locks = [...m.locks].filter(([, held]) => mode === 'write' || held === 'write');
        if (locks.length > 0) return refused('STATE.LOCKED');
        const { live, expired } = runsInTheWay(
          m,
          (run) => mode === 'write' || run.wants.some((w) => w.mode === 'write'),
          at,
        );
        if (live.length > 0) return refused('STATE.LOCKED', live);
        for (const id of expired) m.runs.delete(id);
        m.locks.set(id, mode);
        return { granted: m };
      },
    };
  }

  private unlock(m0: Model, now: number): Step {
    const id = this.lockId(m0);
    return {
      label: `UNLOCK ${id}`,
      command: { type: 'UnlockState', data: { name: NAME, lockId: id }, metadata: ctx(now) },
      expect: (before) => {
        if (before.status !== 'active') return refused('STATE.NOT_FOUND');
        const m = cloneModel(before);
        if (m.locks.delete(id)) return { granted: m };
        if ([...m.locks.values()].includes('write')) return refused('STATE.LOCK_MISMATCH');
        return { granted: m, events: 'none' };
      },
    };
  }

  private forceUnlock(m0: Model, now: number): Step {
    if (this.chance(0.5)) {
      const id = this.lockId(m0);
      return {
        label: `FORCE-UNLOCK ${id}`,
        command: { type: 'ForceUnlockState', data: { name: NAME, lockId: id }, metadata: ctx(now) },
        expect: (before) => {
          if (before.status !== 'active') return refused('STATE.NOT_FOUND');
          const m = cloneModel(before);
          if (m.locks.delete(id)) return { granted: m };
          if (m.locks.size > 0) return refused('STATE.LOCK_MISMATCH');
          return { granted: m, events: 'none' };
        },
      };
    }
    return {
      label: 'FORCE-UNLOCK',
      command: { type: 'ForceUnlockState', data: { name: NAME }, metadata: ctx(now) },
      expect: (before) => {
        if (before.status !== 'active') return refused('STATE.NOT_FOUND');
        const m = cloneModel(before);
        const had = m.locks.size;
        m.locks.clear();
        return { granted: m, events: had > 0 ? 'some' : 'none' };
      },
    };
  }

  /** terraform's POST: the whole document, under a held lock, a gone one, or none. */
  private post(m0: Model, now: number, underLock = true): Step {
    const lockId = underLock && this.chance(0.7) ? this.lockId(m0) : undefined;
    const next = new Map<string, string>();
    for (const a of ADDRESSES) if (this.chance(0.6)) next.set(a, pick(this.r, ['v1', 'v2', 'v3']));
    // A refresh writes back what it read from a version: refused if anyone committed since.
    const base =
      underLock && this.chance(0.2)
        ? Math.max(m0.version - (this.chance(0.3) ? 1 : 0), 0)
        : undefined;
    const source = base === undefined ? 'http' : 'refresh';
    const checksum = this.next('post');
    const stateId = this.next('state');
    const document = documentOf(next, this.counter);
    const step: Step = {
      label:
        `POST under ${lockId ?? 'no lock'}${base === undefined ? '' : ` base ${base}`}: ` +
        [...next].map((e) => e.join('=')).join(' '),
      command: {
        type: 'CommitState',
        data: {
          name: NAME,
          newStateId: stateId,
          document,
          instances: flattenInstances(document),
          ...(lockId === undefined ? {} : { lockId }),
          source,
          checksum,
          ...(base === undefined ? {} : { baseVersion: base }),
        },
        metadata: ctx(now, 'terraform'),
      },
      expect: (before, at) => {
        const head = before.head;
        const sole = before.locks.size === 1 ? [...before.locks.keys()][0] : null;
        if (
          before.status === 'active' &&
          head !== null &&
          head.checksum === checksum &&
          head.source === source &&
          head.runId === null &&
          (base === undefined || base === before.version - 1) &&
          before.locks.size <= 1 &&
          head.lockId === sole &&
          (sole === null || lockId === sole)
        ) {
          return { granted: before, events: 'none' };
        }
        if (base !== undefined && before.status !== 'active') return refused('STATE.NOT_FOUND');
        const m = before.status === 'active' ? cloneModel(before) : created(stateId);
        if (base !== undefined && base !== m.version) return refused('STATE.VERSION_CONFLICT');
        if (m.locks.size > 0) {
          if (lockId === undefined) return refused('STATE.LOCKED');
          if (!m.locks.has(lockId)) return refused('STATE.LOCK_MISMATCH');
          if (m.locks.size > 1) return refused('STATE.LOCKED');
        }
        const { live, expired } = runsInTheWay(m, () => true, at);
        if (live.length > 0) return refused('STATE.LOCKED', live);
        for (const id of expired) m.runs.delete(id);
        const changes = new Map<string, string | null>();
        for (const a of ADDRESSES) changes.set(a, next.get(a) ?? null);
        committed(m, changes, { checksum, source, runId: null });
        return { granted: m };
      },
    };
    this.lastCommit = step;
    return step;
  }

  /** The last commit sent again, its answer lost: done already if it is the head, else judged anew. */
  private retryCommit(m0: Model, now: number): Step {
    const last = this.lastCommit;
    if (last === null) return this.post(m0, now);
    return {
      ...last,
      label: `RETRY ${last.label}`,
      command: { ...last.command, metadata: ctx(now, last.command.metadata.actor) },
    };
  }

  private remove(now: number): Step {
    return {
      label: 'DELETE',
      command: { type: 'DeleteState', data: { name: NAME }, metadata: ctx(now) },
      expect: (before, at) => {
        if (before.status !== 'active') return refused('STATE.NOT_FOUND');
        if (before.locks.size > 0) return refused('STATE.LOCKED');
        const { live } = runsInTheWay(before, () => true, at);
        if (live.length > 0) return refused('STATE.LOCKED', live);
        return { granted: { ...emptyModel(), status: 'deleted', stateId: before.stateId } };
      },
    };
  }

  private acquire(m0: Model, now: number): Step {
    const runId = this.next('run');
    const engine = this.chance(0.25);
    // Globs drawn independently: one may come twice, in one mode or both.
    const wants = Array.from({ length: 1 + Math.floor(this.r() * 3) }, (): Want => ({
      glob: pick(this.r, GLOBS),
      mode: this.chance(0.5) ? 'write' : 'read',
    }));
    // Mostly the current version; sometimes an older one (a plan made a while ago).
    const base =
      m0.version > 1 && this.chance(0.4)
        ? 1 + Math.floor(this.r() * m0.version)
        : Math.max(m0.version, 1);
    const lease = pick(this.r, [5, 20, 60, 300]);
    const command: StateCommand = {
      type: 'AcquireReservations',
      data: {
        name: NAME,
        runId,
        reservationIds: wants.map((_, i) => `${runId}-r${i}`),
        requests: wants,
        leaseSeconds: lease,
        info: engine ? { state_engine_operation: 'state mv' } : { plan: runId },
        baseVersion: base,
        writeSet: wants.filter((w) => w.mode === 'write').map((w) => w.glob),
        readSet: wants.filter((w) => w.mode === 'read').map((w) => w.glob),
      },
      metadata: ctx(now, engine ? 'engine' : 'carol'),
    };
    this.acquires.set(runId, command);
    const unique = wants.filter(
      (w, i) => wants.findIndex((v) => v.glob === w.glob && v.mode === w.mode) === i,
    );
    return {
      label:
        `${engine ? 'ENGINE' : 'APPLY'} ${runId} base ${base} lease ${lease}s: ` +
        wants.map((w) => `${w.mode} ${w.glob}`).join(', '),
      command,
      expect: (before, at) => expectAcquire(before, at, runId, unique, base, lease, engine),
    };
  }

  /** A retried acquire (the client never got the answer): done already, or refused as before. */
  private retryAcquire(m0: Model, now: number): Step {
    const runs = [...this.acquires.keys()];
    if (runs.length === 0) return this.acquire(m0, now);
    const runId = pick(this.r, runs);
    const first = this.acquires.get(runId)!;
    const command = { ...first, metadata: ctx(now, first.metadata.actor) } as StateCommand;
    if (command.type !== 'AcquireReservations') throw new Error('not an acquire');
    const d = command.data;
    const wants = d.requests as Want[];
    const unique = wants.filter(
      (w, i) => wants.findIndex((v) => v.glob === w.glob && v.mode === w.mode) === i,
    );
    const engine = d.info.state_engine_operation !== undefined;
    return {
      label: `RETRY ${runId}`,
      command,
      expect: (before, at) =>
        expectAcquire(before, at, runId, unique, d.baseVersion, d.leaseSeconds, engine),
    };
  }

  private renew(m0: Model, now: number): Step {
    const runId = this.runId(m0);
    const lease = pick(this.r, [5, 20, 60, 300]);
    return {
      label: `HEARTBEAT ${runId} lease ${lease}s`,
      command: {
        type: 'RenewReservations',
        data: { name: NAME, runId, leaseSeconds: lease },
        metadata: ctx(now),
      },
      expect: (before, at) => {
        if (before.status !== 'active') return refused('STATE.NOT_FOUND');
        const run = before.runs.get(runId);
        if (run === undefined) return refused('RESERVATION.EXPIRED');
        // Renewed even when its lease ran out, if nobody reclaimed it.
        const m = cloneModel(before);
        m.runs.set(runId, { ...run, expiresAt: at + lease * 1000 });
        return { granted: m };
      },
    };
  }

  private release(m0: Model, now: number): Step {
    const runId = this.runId(m0);
    const reason = pick(this.r, ['failed', 'conflict', 'aborted'] as const);
    return {
      label: `FINISH ${runId} (${reason})`,
      command: {
        type: 'ReleaseReservations',
        data: { name: NAME, runId, reason },
        metadata: ctx(now),
      },
      expect: (before) => {
        if (before.status !== 'active') return refused('STATE.NOT_FOUND');
        const m = cloneModel(before);
        return { granted: m, events: m.runs.delete(runId) ? 'some' : 'none' };
      },
    };
  }

  /** Instances set or removed: mostly inside the addresses given, sometimes anywhere. */
  private change(inside: string[]): Map<string, string | null> {
    const from = inside.length > 0 && this.chance(0.75) ? inside : ADDRESSES;
    const changes = new Map<string, string | null>();
    for (const a of this.someOf(from, 3)) {
      changes.set(a, this.chance(0.3) ? null : pick(this.r, ['v1', 'v2', 'v3']));
    }
    return changes;
  }

  private deltaCommand(
    now: number,
    changes: Map<string, string | null>,
    by: { runId?: string; lockId?: string },
    base: number,
    release: boolean,
    source: 'apply' | 'state-engine' | 'http',
  ): StateCommand {
    const upserts: DeltaUpsert[] = [];
    const deletes: string[] = [];
    for (const [a, v] of changes) {
      if (v === null) deletes.push(a);
      else upserts.push(upsertOf(a, v));
    }
    return {
      type: 'CommitDelta',
      data: {
        name: NAME,
        source,
        ...by,
        baseVersion: base,
        // Of the body, as the transport computes it: two writers sending the same change collide.
        checksum: `base ${base}${release ? ' release' : ''}: ${[...changes].join(' ')}`,
        upserts,
        deletes,
        outputs: { set: {}, remove: [] },
        release,
      },
      metadata: ctx(now),
    };
  }

  /** A run's row-level commit: inside its write set mostly, from its base or the current version. */
  private runCommit(m0: Model, now: number): Step {
    const runId = this.runId(m0, true);
    const run = m0.runs.get(runId);
    const inside = ADDRESSES.filter((a) =>
      run?.wants.some((w) => w.mode === 'write' && covers(w.glob, a)),
    );
    const changes = this.change(inside);
    const base = run !== undefined && this.chance(0.7) ? run.base : Math.max(m0.version, 1);
    const release = this.chance(0.5);
    const source = run?.engine ? 'state-engine' : 'apply';
    const command = this.deltaCommand(now, changes, { runId }, base, release, source);
    this.lastCommit = {
      label:
        `COMMIT by ${runId} base ${base}${release ? ' +release' : ''}: ` +
        [...changes].map(([a, v]) => `${a}=${v ?? 'deleted'}`).join(' '),
      command,
      expect: (before, at) => expectDelta(before, at, command, changes),
    };
    return this.lastCommit;
  }

  /** A row-level change by the holder of a terraform lock, or by nobody. */
  private otherCommit(m0: Model, now: number): Step {
    const lockId = this.chance(0.5) ? this.lockId(m0) : undefined;
    const changes = this.change([]);
    const base = Math.max(m0.version, 1);
    const by = lockId === undefined ? {} : { lockId };
    const command = this.deltaCommand(now, changes, by, base, false, 'http');
    this.lastCommit = {
      label:
        `COMMIT under ${lockId ?? 'no lock'} base ${base}: ` +
        [...changes].map(([a, v]) => `${a}=${v ?? 'deleted'}`).join(' '),
      command,
      expect: (before, at) => expectDelta(before, at, command, changes),
    };
    return this.lastCommit;
  }
}

/** A run's acquire, all or nothing; a retry of what the run holds is done already. */
function expectAcquire(
  before: Model,
  at: number,
  runId: string,
  unique: Want[],
  base: number,
  lease: number,
  engine: boolean,
): Outcome {
  if (before.status !== 'active') return refused('STATE.NOT_FOUND');
  if (before.version === 0) return refused('APPLY.NO_VERSION');
  if (base > before.version) return refused('APPLY.INVALID');
  const held = before.runs.get(runId);
  if (held !== undefined) {
    const same =
      held.wants.length === unique.length &&
      held.wants.every((h) => unique.some((w) => w.glob === h.glob && w.mode === h.mode));
    return same ? { granted: before, events: 'none' } : refused('APPLY.ALREADY_STARTED');
  }
  const writes = unique.some((w) => w.mode === 'write');
  if ([...before.locks.values()].some((mode) => writes || mode === 'write')) {
    return refused('RESERVATION.CONFLICT');
  }
  const { live, expired } = runsInTheWay(
    before,
    (run) => run.wants.some((h) => unique.some((w) => clash(h, w))),
    at,
  );
  if (live.length > 0) return refused('RESERVATION.CONFLICT');
  for (const [address, version] of before.changedIn) {
    if (version > base && unique.some((w) => covers(w.glob, address))) {
      return refused('APPLY.STALE');
    }
  }
  const m = cloneModel(before);
  for (const id of expired) m.runs.delete(id);
  m.runs.set(runId, { wants: unique, base, expiresAt: at + lease * 1000, engine });
  return { granted: m };
}

function expectDelta(
  before: Model,
  at: number,
  command: StateCommand,
  changes: Map<string, string | null>,
): Outcome {
  if (command.type !== 'CommitDelta') throw new Error('not a delta');
  const { runId, lockId, baseVersion: base, release, checksum, source } = command.data;
  const by = { runId, lockId };
  if (before.status !== 'active') return refused('STATE.NOT_FOUND');
  if (before.version === 0) return refused('APPLY.NO_VERSION');
  const head = before.head;
  if (
    head !== null &&
    head.checksum === checksum &&
    head.source === source &&
    head.runId === (runId ?? null) &&
    head.lockId === (lockId ?? null)
  ) {
    return { granted: before, events: 'none' };
  }
  if (base > before.version) return refused('APPLY.INVALID');
  const touched = [...changes.keys()];
  if (by.runId !== undefined) {
    const run = before.runs.get(by.runId);
    if (run === undefined) return refused('RESERVATION.NOT_HELD');
    const writes = run.wants.filter((w) => w.mode === 'write');
    if (!touched.every((a) => writes.some((w) => covers(w.glob, a)))) {
      return refused('RESERVATION.NOT_HELD');
    }
  }
  if ([...before.locks.keys()].some((id) => id !== by.lockId)) {
    return refused('RESERVATION.CONFLICT');
  }
  const { live, expired } = runsInTheWay(
    before,
    (run, id) => id !== by.runId && run.wants.some((w) => touched.some((a) => covers(w.glob, a))),
    at,
  );
  if (live.length > 0) return refused('RESERVATION.CONFLICT');
  if (touched.some((a) => (before.changedIn.get(a) ?? 0) > base)) return refused('APPLY.STALE');
  const m = cloneModel(before);
  for (const id of expired) m.runs.delete(id);
  committed(m, changes, { checksum, source, runId: runId ?? null });
  if (release === true && by.runId !== undefined) m.runs.delete(by.runId);
  return { granted: m, writer: by.runId };
}

// ---------------------------------------------------------------- checks

function fail(message: string): never {
  throw new Error(message);
}

function same<T>(actual: T, expected: T, what: string): void {
  const a = JSON.stringify(actual);
  const e = JSON.stringify(expected);
  if (a !== e) fail(`${what}:\n  actual   ${a}\n  expected ${e}`);
}

const sorted = <T>(xs: T[]) => [...xs].sort();

/** The aggregate holds what the model says. */
function agrees(state: StateAggregate, m: Model, hashes: Map<string, string>): void {
  same(state.status, m.status, 'status');
  if (state.status === 'missing') return;
  same(state.stateId, m.stateId, 'state id');
  if (state.status !== 'active') return;
  same(state.version, m.version, 'version');
  same(
    sorted([...state.instances]),
    sorted([...m.instances].map(([a, v]) => [a, hashes.get(`${a}=${v}`)!])),
    'instances',
  );
  same(sorted([...state.changedIn]), sorted([...m.changedIn]), 'changed in');
  same(
    sorted([...state.locks].map(([id, l]) => `${id} ${l.mode}`)),
    sorted([...m.locks].map(([id, mode]) => `${id} ${mode}`)),
    'terraform locks',
  );
  const held = new Map<string, string[]>();
  for (const r of state.reservations.values()) {
    held.set(r.runId, [...(held.get(r.runId) ?? []), `${r.mode} ${r.glob} until ${r.expiresAt}`]);
  }
  same(
    sorted([...held].map(([id, rs]) => `${id}: ${sorted(rs).join(', ')}`)),
    sorted(
      [...m.runs].map(
        ([id, run]) =>
          `${id}: ${sorted(
            run.wants.map(
              (w) => `${w.mode} ${w.glob} until ${new Date(run.expiresAt).toISOString()}`,
            ),
          ).join(', ')}`,
      ),
    ),
    'reservations',
  );
}

/**
 * Safety, read from the aggregate itself: whoever it holds, expired or not
 * (a grant reclaims the expired runs in its way), is out of everyone
 * else's way.
 */
function nobodyInTheWay(state: StateAggregate): void {
  if (state.status !== 'active') return;
  const locks = [...state.locks.values()];
  const reservations = [...state.reservations.values()];
  if (locks.some((l) => l.mode === 'write')) {
    if (locks.length > 1) fail('a terraform write lock beside another lock');
    if (reservations.length > 0) fail('a terraform write lock beside an apply run');
  }
  if (locks.length > 0 && reservations.some((r) => r.mode === 'write')) {
    fail('a terraform plan lock beside a run that writes');
  }
  for (const a of reservations) {
    for (const b of reservations) {
      if (a.runId < b.runId && clash(a, b)) {
        fail(`${a.runId} (${a.mode} ${a.glob}) and ${b.runId} (${b.mode} ${b.glob}) both held`);
      }
    }
  }
}

const snapshotOf = (state: StateAggregate) => JSON.parse(JSON.stringify(toSnapshot(state)));

function decideOn(command: StateCommand, state: StateAggregate): StateEvent[] | DomainError {
  try {
    return decide(command, state);
  } catch (e) {
    if (e instanceof DomainError) return e;
    throw e;
  }
}

const describeResult = (r: StateEvent[] | DomainError) =>
  r instanceof DomainError ? `${r.code}: ${r.message}` : r;

/** The hash each (address, value) has as an instance, for comparing with the aggregate. */
function hashTable(): Map<string, string> {
  const table = new Map<string, string>();
  for (const u of UNIVERSE) {
    for (const v of ['v1', 'v2', 'v3']) {
      table.set(`${u.address}=${v}`, instanceHash(u.resource, instanceOf(v, u.key)));
    }
  }
  return table;
}

function runSeed(seed: number, hashes: Map<string, string>): void {
  const driver = new Driver(seed);
  const r = rng(seed ^ 0x5bd1e995);
  const steps: string[] = [];
  let model = emptyModel();
  let state = initialState();
  const log: StateEvent[] = [];
  // A snapshot taken at a random earlier step, and the events since.
  let shadow = fromSnapshot(snapshotOf(state));
  let now = T0;
  try {
    for (let i = 0; i < STEPS; i++) {
      now += 1000 * pick(r, [0, 0, 1, 3, 10, 30, 60]);
      const step = driver.step(model, now, i === 0);
      steps.push(`${i} +${(now - T0) / 1000}s ${step.label}`);
      const expected = step.expect(model, now);
      const before = JSON.stringify(toSnapshot(state));
      const result = decideOn(step.command, state);
      steps[i] +=
        result instanceof DomainError ? ` → ${result.code}` : ` → ${result.length} events`;
      // Deciding is pure: granted or refused, the state it looked at is as it was.
      same(JSON.stringify(toSnapshot(state)), before, 'the state after deciding');
      same(
        describeResult(decideOn(step.command, shadow)),
        describeResult(result),
        'the decision on the state loaded from a snapshot',
      );
      if ('refused' in expected) {
        if (!(result instanceof DomainError)) {
          fail(`expected ${expected.refused}, granted with ${JSON.stringify(result)}`);
        }
        same(result.code, expected.refused, `the refusal (${result.message})`);
        if (expected.runHolder !== undefined) {
          // terraform prints the holder of a 423: one of the runs in the way, named as what it is.
          const holder = (result.metadata as { holder: LockInfo }).holder;
          if (!expected.runHolder.includes(holder.ID)) fail(`423 names ${holder.ID}`);
          const engine = model.runs.get(holder.ID)!.engine;
          same(holder.Operation, engine ? 'state-engine: state mv' : 'kl apply', 'its operation');
        }
        continue;
      }
      if (result instanceof DomainError) fail(`expected a grant, refused: ${result.message}`);
      if (expected.events === 'none') same(result, [], 'events of a no-op');
      if (expected.events === 'some' && result.length === 0) fail('no events');
      if (expected.writer !== undefined) {
        // A run's commit changes only what its write reservations cover.
        const run = model.runs.get(expected.writer)!;
        for (const e of result) {
          if (e.type !== 'LifecycleOpened' && e.type !== 'LifecycleClosed') continue;
          const a = e.data.address;
          if (!run.wants.some((w) => w.mode === 'write' && covers(w.glob, a))) {
            fail(`${expected.writer} changed ${a}, outside its write reservations`);
          }
        }
      }
      log.push(...result);
      const previous = state;
      state = result.reduce(evolve, state);
      shadow = result.reduce(evolve, shadow);
      // A state is a value: one that failed to append is decided on again, as it was.
      same(JSON.stringify(toSnapshot(previous)), before, 'the state before the events');
      model = expected.granted;
      agrees(state, model, hashes);
      nobodyInTheWay(state);
      same(toSnapshot(shadow), toSnapshot(state), 'the state from a snapshot plus the tail');
      if (i % 5 === 4 || i === STEPS - 1) {
        same(
          toSnapshot(log.reduce(evolve, initialState())),
          toSnapshot(state),
          'the state replayed from scratch',
        );
      }
      if (r() < 0.15) shadow = fromSnapshot(snapshotOf(state));
    }
  } catch (e) {
    const message = e instanceof Error ? e.message : String(e);
    throw new Error(
      `seed ${seed} (KL_FUZZ_SEED=${seed} replays it), step ${steps.length - 1}: ${message}\n${steps.join('\n')}`,
    );
  }
}

describe('State: many writers in random interleavings', () => {
  it(`keeps every holder out of the others' way, and every refusal a no-op (${SEEDS.length} seeds × ${STEPS} steps)`, () => {
    const hashes = hashTable();
    for (const seed of SEEDS) runSeed(seed, hashes);
  });
});
