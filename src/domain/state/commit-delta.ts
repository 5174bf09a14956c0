import { DomainError } from '../shared/domain-error';
import { diffOutputs, outputHashes } from '../terraform/diff-outputs';
import { compareGoStrings } from '../terraform/go-string-order';
import {
  instanceAddressOf,
  InstanceAddress,
  parseInstanceAddress,
  parseModulePath,
} from '../terraform/instance-address';
import { OutputV4 } from '../terraform/state-document';
import { instanceHash } from '../terraform/state-instances';
import { countedResources } from '../quota/quota-limits';
import { quotaOverrun } from './quota-checks';
import { Asker, coveringHolders, reclaim, reservationsOf, uncovered } from './holders';
import { conflictError, staleError } from './reserve';
import { CommitDelta, DeltaUpsert } from './state.commands';
import {
  APPLY_INVALID,
  APPLY_NO_VERSION,
  RESERVATION_NOT_HELD,
  STATE_NOT_FOUND,
} from './state.errors';
import { StateEvent } from './state.events';
import { resourceAddressOf, resourceFields } from './state.evolve';
import { ActiveState, StateAggregate } from './state.model';

function invalid(message: string, metadata: Record<string, unknown> = {}): DomainError {
  return new DomainError(APPLY_INVALID, message, metadata);
}

function parseTouched(text: string): { text: string; parsed: InstanceAddress } {
  try {
    return { text, parsed: parseInstanceAddress(text) };
  } catch {
    throw invalid(`${JSON.stringify(text)} is not a resource instance address`);
  }
}

/** Each upsert's address must be the one its resource fields and instance keys spell. */
function checkUpsertAddress(u: DeltaUpsert): void {
  let spelled: string;
  try {
    spelled = instanceAddressOf(parseModulePath(u.resource.module), u.resource, u.instance);
  } catch {
    throw invalid(`the resource of ${u.address} has an invalid module path`);
  }
  if (spelled !== u.address) {
    throw invalid(`upsert ${u.address}: its resource and instance spell ${spelled}`);
  }
}

/** Outputs after the change, in the order terraform writes them (by name). */
function mergeOutputs(
  current: Record<string, OutputV4>,
  change: CommitDelta['data']['outputs'],
): Record<string, OutputV4> {
  for (const name of change.remove) {
    if (name in change.set) throw invalid(`output ${name} is both set and removed`);
  }
  const merged = new Map(Object.entries(current));
  for (const name of change.remove) merged.delete(name);
  for (const [name, output] of Object.entries(change.set)) {
    // Member order and the omitted `sensitive: false` follow terraform's writer.
    const { value, type, sensitive, ...rest } = output;
    merged.set(name, {
      value,
      ...(type === undefined ? {} : { type }),
      ...(sensitive === true ? { sensitive: true } : {}),
      ...rest,
    });
  }
  const out: Record<string, OutputV4> = {};
  for (const name of [...merged.keys()].sort(compareGoStrings)) out[name] = merged.get(name)!;
  return out;
}

/**
 * Instances of one resource share its resource-level fields (provider…):
 * an upsert may change them only by carrying every instance of it.
 */
function checkResourceFields(state: ActiveState, upserts: DeltaUpsert[], touched: Set<string>) {
  const byResource = new Map<string, { fields: string; first: string }>();
  for (const u of upserts) {
    const at = resourceAddressOf(u.address, u.instance.index_key, u.instance.deposed);
    const fields = resourceFields(u.resource);
    const seen = byResource.get(at);
    if (seen && seen.fields !== fields) {
      throw invalid(`${u.address} and ${seen.first} disagree on the fields of resource ${at}`);
    }
    if (!seen) byResource.set(at, { fields, first: u.address });
  }
  for (const [at, { fields, first }] of byResource) {
    const entry = state.resources.get(at);
    if (entry === undefined || entry.fields === fields) continue;
    let carried = 0;
    for (const address of touched) {
      if (state.instances.has(address) && resourceOf(address) === at) carried++;
    }
    if (carried < entry.instances) {
      throw invalid(
        `${first} changes the provider or fields of resource ${at}, whose other instances ` +
          'this change does not carry',
      );
    }
  }
}

function resourceOf(address: string): string {
  const a = parseInstanceAddress(address);
  return resourceAddressOf(address, a.key, a.deposed);
}

/** Resources with instances after the change, counted from the current ones. */
function resourceCountAfter(
  state: ActiveState,
  added: string[],
  removed: string[],
  upserts: Map<string, DeltaUpsert>,
): number {
  const change = new Map<string, number>();
  for (const address of added) {
    const u = upserts.get(address)!;
    const at = resourceAddressOf(address, u.instance.index_key, u.instance.deposed);
    change.set(at, (change.get(at) ?? 0) + 1);
  }
  for (const address of removed) {
    const at = resourceOf(address);
    change.set(at, (change.get(at) ?? 0) - 1);
  }
  let count = state.resources.size;
  for (const [at, delta] of change) {
    const before = state.resources.get(at)?.instances ?? 0;
    if (before === 0 && before + delta > 0) count++;
    if (before > 0 && before + delta <= 0) count--;
  }
  return count;
}

function isRetryOfHead(d: CommitDelta['data'], state: ActiveState): boolean {
  const { head } = state;
  return (
    head !== null &&
    head.checksum === d.checksum &&
    head.source === d.source &&
    (head.runId ?? null) === (d.runId ?? null) &&
    head.lockId === (d.lockId ?? null)
  );
}

/**
 * A row-level change on top of whatever the current version is: see
 * CommitDelta. Every refusal changes nothing.
 */
export function commitDelta(command: CommitDelta, state: StateAggregate): StateEvent[] {
  const d = command.data;
  const { now } = command.metadata;
  if (state.status !== 'active') {
    throw new DomainError(STATE_NOT_FOUND, `state ${d.name} does not exist`);
  }
  if (state.version === 0 || state.meta === null || state.serial === null || !state.lineage) {
    throw new DomainError(
      APPLY_NO_VERSION,
      `state ${d.name} has no version yet: write its first version with terraform`,
    );
  }
  if (isRetryOfHead(d, state)) return [];
  if (!Number.isSafeInteger(d.baseVersion) || d.baseVersion < 1 || d.baseVersion > state.version) {
    throw invalid(
      `base version ${d.baseVersion} is not a version of state ${d.name} (1 to ${state.version})`,
    );
  }

  const upserts = new Map<string, DeltaUpsert>();
  for (const u of d.upserts) {
    if (upserts.has(u.address)) throw invalid(`${u.address} is upserted twice`);
    checkUpsertAddress(u);
    upserts.set(u.address, u);
  }
  const deletes = new Set<string>();
  for (const address of d.deletes) {
    if (upserts.has(address) || deletes.has(address)) {
      throw invalid(`${address} is named twice in the change`);
    }
    deletes.add(address);
  }
  const touched = [...upserts.keys(), ...deletes].map(parseTouched);

  const asker: Asker = {
    ...(d.runId === undefined ? {} : { runId: d.runId }),
    ...(d.lockId === undefined ? {} : { lockId: d.lockId }),
  };
  if (d.runId !== undefined) {
    const held = reservationsOf(state, d.runId);
    if (held.length === 0) {
      throw new DomainError(
        RESERVATION_NOT_HELD,
        `run ${d.runId} holds no reservations on state ${d.name}: they were released, or ` +
          'reclaimed after its lease ran out; nothing was committed',
        { addresses: touched.map((t) => t.text) },
      );
    }
    const outside = uncovered(state, d.runId, touched);
    if (outside.length > 0) {
      throw new DomainError(
        RESERVATION_NOT_HELD,
        `run ${d.runId} does not hold a write reservation covering ${outside.slice(0, 5).join(', ')}` +
          `${outside.length > 5 ? ` and ${outside.length - 5} more` : ''}; nothing was committed`,
        { addresses: outside },
      );
    }
  }
  const { live, expired } = coveringHolders(state, touched, asker, now);
  if (live.length > 0) throw conflictError(d.name, live);

  const stale = touched
    .map((t) => ({ address: t.text, changedInVersion: state.changedIn.get(t.text) ?? 0 }))
    .filter((s) => s.changedInVersion > d.baseVersion);
  if (stale.length > 0) throw staleError(d.name, d.baseVersion, stale);

  checkResourceFields(state, d.upserts, new Set([...upserts.keys(), ...deletes]));
  const outputs = mergeOutputs(state.meta.outputs, d.outputs);

  const { stateId } = state;
  const version = state.version + 1;
  const serial = state.serial + 1;
  const closed: { address: string; hash: string }[] = [];
  const opened: { upsert: DeltaUpsert; hash: string }[] = [];
  const added: string[] = [];
  const removed: string[] = [];
  for (const u of upserts.values()) {
    const hash = instanceHash(u.resource, u.instance);
    const before = state.instances.get(u.address);
    if (before === hash) continue;
    if (before !== undefined) closed.push({ address: u.address, hash: before });
    else added.push(u.address);
    opened.push({ upsert: u, hash });
  }
  for (const address of deletes) {
    const before = state.instances.get(address);
    if (before === undefined) continue; // already gone: nothing to remove
    closed.push({ address, hash: before });
    removed.push(address);
  }

  const events: StateEvent[] = [
    ...reclaim(state, expired, d.runId ?? d.lockId ?? `version ${version}`),
    {
      type: 'ApplyCommitted',
      data: {
        stateId,
        version,
        serial,
        lineage: state.lineage,
        source: d.source,
        ...(d.runId === undefined ? {} : { runId: d.runId }),
        terraformVersion: d.terraformVersion ?? state.meta.terraformVersion,
        outputs,
        outputChanges: diffOutputs(state.outputs, outputHashes(outputs)),
        checkResults: state.meta.checkResults,
        extra: state.meta.extra,
        checksum: d.checksum,
        instanceCount: state.instances.size + added.length - removed.length,
        resourceCount: resourceCountAfter(state, added, removed, upserts),
      },
    },
    ...closed.map((c): StateEvent => ({
      type: 'LifecycleClosed',
      data: { stateId, version, serial, address: c.address, hash: c.hash },
    })),
    ...opened.map((o): StateEvent => ({
      type: 'LifecycleOpened',
      data: {
        stateId,
        version,
        serial,
        address: o.upsert.address,
        hash: o.hash,
        resource: o.upsert.resource,
        instance: o.upsert.instance,
      },
    })),
  ];
  if (d.release && d.runId !== undefined) {
    const held = reservationsOf(state, d.runId);
    events.push({
      type: 'ReservationReleased',
      data: { stateId, runId: d.runId, reservationIds: held.map((r) => r.id), reason: 'committed' },
    });
  }
  if (d.quota !== undefined) {
    const count =
      countedResources(state.instances.keys()) +
      countedResources(added) -
      countedResources(removed);
    events.push(...quotaOverrun(state, d.quota, version, count));
  }
  return events;
}
