import { ApplyLane } from '../../domain/apply/apply-run.events';
import { PlanScope } from '../../domain/apply/kl-plan';
import { Footprint, sliceOf } from '../../domain/apply/state-slice';
import { DomainError } from '../../domain/shared/domain-error';
import { GlobIndex, parseAddressGlob } from '../../domain/reservations';
import { parseInstanceAddress } from '../../domain/terraform/instance-address';
import type { StateDocumentV4 } from '../../domain/terraform/state-document';
import {
  ApplyServerPort,
  EngineCandidates,
  EngineOffer,
  EngineScope,
  EngineSlice,
} from './apply-server.port';

/**
 * The two lanes `kl plan` and `kl apply` run on (ADR 0029 D8), as one
 * strategy: where the state terraform works on comes from (the whole trunk,
 * sliced here, or the server's slice of the scope) and which lane the run
 * records. Everything else — terraform, the write set, reservations, the
 * row-level commit — is the same code for both.
 */

/** How kl talks to the state (`kl config`: flag > KL_PROTOCOL > .kl.toml > auto). */
export const PROTOCOLS = ['http', 'state-engine', 'auto'] as const;
export type Protocol = (typeof PROTOCOLS)[number];

/** What the state-engine lane must offer for kl plan/apply to use it. */
const NEEDED_OPERATIONS = ['scope', 'slice', 'runs', 'delta-commit'];
export const ENGINE_PROTOCOL_VERSION = 1;
/** A server that offers this answers a scope expansion with its slice when asked. */
export const SCOPE_WITH_SLICE = 'scope-slice';

export const ENGINE_UNAVAILABLE = 'CONFIG.INVALID';

/** The state terraform works on, the version it was read at, and the lane that wrote it. */
export interface LaneState {
  lane: ApplyLane;
  slice: StateDocumentV4;
  version: number;
}

/** The plan's choice: the lane, why, and what the server's scope expansion said. */
export interface LaneChoice extends LaneState {
  reasons: string[];
  scope: PlanScope | null;
  /** The reservations the server's scope contract names (trusted lane only). */
  serverReservations?: { write: string[]; read: string[] };
}

/** Footprint entries as state-engine candidates: module calls as prefixes, resources as addresses. */
export function candidatesOf(footprint: readonly string[]): EngineCandidates {
  return {
    addresses: footprint.filter((f) => !f.startsWith('module.')),
    modulePrefixes: footprint.filter((f) => f.startsWith('module.')),
  };
}

function offers(offer: EngineOffer | null): offer is EngineOffer {
  return (
    offer !== null &&
    offer.protocolVersion === ENGINE_PROTOCOL_VERSION &&
    NEEDED_OPERATIONS.every((o) => offer.operations.includes(o))
  );
}

/** The full-trunk lane: the whole document, sliced to the footprint here. */
async function fullTrunk(
  server: ApplyServerPort,
  state: string,
  footprint: Footprint,
): Promise<LaneState> {
  const trunk = await server.trunk(state);
  return { lane: 'full', slice: sliceOf(trunk.document, footprint), version: trunk.version };
}

/**
 * The scope expansion asked with its slice beside the offer, by a caller
 * that knows the server has the lane (protocol state-engine, or kl apply of
 * a trusted plan): the offer still decides whether the answer is used.
 */
function scopeBesideOffer(
  server: ApplyServerPort,
  state: string,
  candidates: EngineCandidates,
): Promise<EngineScope> {
  const early = server.expandScope(state, candidates, { withSlice: true });
  early.catch(() => undefined); // awaited when the offer lists scope-slice; dropped otherwise
  return early;
}

/** A scope the server proved safe with its slice of one version, or why there is none. */
type ProvenSlice =
  | { kind: 'sliced'; expanded: EngineScope; slice: EngineSlice }
  | { kind: 'unproven'; expanded: EngineScope }
  | { kind: 'changing'; expanded: EngineScope };

/**
 * The one way kl plan and kl apply get a proven scope's slice: in one
 * exchange when the offer lists `scope-slice` (the first answer may already
 * be on its way, `early`), else the scope, then the slice. Only a proven
 * scope's slice is used, and only of the version it was proven at: a slice
 * of another version means asking again, twice at most. `admit` may refuse
 * a proven scope (by throwing) before its slice is fetched or used.
 */
async function provenSlice(
  server: ApplyServerPort,
  state: string,
  candidates: EngineCandidates,
  offered: EngineOffer,
  early: Promise<EngineScope> | null,
  admit: (expanded: EngineScope) => void = () => undefined,
): Promise<ProvenSlice> {
  const combined = offered.operations.includes(SCOPE_WITH_SLICE);
  for (let attempt = 1; ; attempt++) {
    const expanded = await (attempt === 1 && combined && early !== null
      ? early
      : server.expandScope(state, candidates, { withSlice: combined }));
    if (!expanded.provablySafe) return { kind: 'unproven', expanded };
    admit(expanded);
    const slice = expanded.slice ?? (await server.slice(state, candidates));
    if (slice.version === expanded.version) return { kind: 'sliced', expanded, slice };
    if (attempt >= 3) return { kind: 'changing', expanded };
  }
}

function planScope(expanded: EngineScope): PlanScope {
  return {
    provablySafe: expanded.provablySafe,
    unresolved: expanded.unresolved.map((u) => ({
      candidate: u.candidate,
      classification: u.classification,
    })),
    closure: expanded.closure.map((c) => ({
      address: c.address,
      direction: c.direction,
      via: c.via,
    })),
    slice: null,
  };
}

/**
 * `kl plan`'s lane. With protocol http, the full-trunk lane. Otherwise the
 * server expands the scope of the `-f` footprint; only when it proves the
 * scope safe does kl take just that slice and plan for the trusted lane.
 * When it cannot, kl falls back to the full-trunk lane and says why. `auto`
 * takes the state-engine lane only when the server's metadata offers it;
 * `state-engine` asked of a server without it is a configuration error.
 */
export async function chooseLane(
  server: ApplyServerPort,
  protocol: Protocol,
  state: string,
  footprint: Footprint,
  /** The server's engineOffer() when the caller already asked for it. */
  offer?: Promise<EngineOffer | null>,
): Promise<LaneChoice> {
  const full = async (reasons: string[], scope: PlanScope | null = null) => ({
    ...(await fullTrunk(server, state, footprint)),
    reasons,
    scope,
  });
  if (protocol === 'http') return full(['protocol http: the full-trunk lane']);
  const candidates = footprint === null ? null : candidatesOf(footprint);
  // Protocol state-engine says the server has the lane: the scope is asked beside the offer.
  const early =
    protocol === 'state-engine' && candidates !== null
      ? scopeBesideOffer(server, state, candidates)
      : null;
  const offered = await (offer ?? server.engineOffer());
  if (!offers(offered)) {
    if (protocol === 'state-engine') {
      throw new DomainError(
        ENGINE_UNAVAILABLE,
        `protocol state-engine, but the server offers no state-engine lane (protocol ${ENGINE_PROTOCOL_VERSION} with ${NEEDED_OPERATIONS.join(', ')}): use protocol http or auto`,
      );
    }
    return full(['protocol auto: the server offers no state-engine lane, so the full-trunk lane']);
  }
  if (candidates === null) {
    return full([
      `protocol ${protocol}: without -f the whole configuration is in scope, so the full-trunk lane`,
    ]);
  }
  // The state's instance count is metadata the plan only reports: asked beside the expansion
  // (a combined answer carries it).
  const stateInstances = offered.operations.includes(SCOPE_WITH_SLICE)
    ? null
    : server.engineInstanceCount(state);
  stateInstances?.catch(() => undefined); // awaited with the slice; unawaited when falling back
  const proven = await provenSlice(server, state, candidates, offered, early);
  const scope = planScope(proven.expanded);
  if (proven.kind === 'unproven') {
    return full(
      [
        `protocol ${protocol}: the server cannot prove the scope safe (${proven.expanded.reasons.join('; ')}), so kl falls back to the full-trunk lane`,
      ],
      scope,
    );
  }
  if (proven.kind === 'changing') {
    return full(
      [
        `protocol ${protocol}: the state kept changing between scope expansion and slice, so kl falls back to the full-trunk lane`,
      ],
      scope,
    );
  }
  const { expanded, slice } = proven;
  return {
    lane: 'state-engine',
    slice: slice.document,
    version: slice.version,
    reasons: [
      `protocol ${protocol}: the server proved the scope safe, so the trusted state-engine lane`,
    ],
    scope: {
      ...scope,
      slice: {
        instances: countInstances(slice.document),
        bytes: slice.bytes,
        stateInstances:
          expanded.instanceCount ?? (await (stateInstances ?? server.engineInstanceCount(state))),
      },
    },
    serverReservations: expanded.reservations,
  };
}

/**
 * `kl apply`'s state: the lane its plan chose, read again at the current
 * version (the plan file keeps no slice). The trusted lane is taken only on
 * a scope the server proves safe now, not only when it was planned: the
 * state may have changed since (a dependency removed, a new dependent), so
 * the scope is expanded again and must still be provable, and everything it
 * now reserves must be among what the run holds (`reserved`: the plan's
 * reservations). Otherwise nothing is applied and kl says to plan again.
 * The plan found the lane on this server, so the scope with its slice is
 * asked beside the offer, as kl plan does with protocol state-engine.
 */
export async function laneState(
  server: ApplyServerPort,
  lane: ApplyLane,
  state: string,
  footprint: Footprint,
  reserved: { write: string[]; read: string[] } = { write: [], read: [] },
): Promise<LaneState> {
  if (lane === 'full' || footprint === null) return fullTrunk(server, state, footprint);
  const candidates = candidatesOf(footprint);
  const early = scopeBesideOffer(server, state, candidates);
  const offered = await server.engineOffer();
  if (!offers(offered)) {
    throw new DomainError(
      SCOPE_CHANGED,
      'the server no longer offers the state-engine lane this plan was made for: nothing applied; run kl plan again',
    );
  }
  const held = coverage([...reserved.write, ...reserved.read]);
  const proven = await provenSlice(server, state, candidates, offered, early, (expanded) => {
    const uncovered = [...expanded.reservations.write, ...expanded.reservations.read].filter(
      (a) => !held(a),
    );
    if (uncovered.length > 0) {
      throw new DomainError(
        SCOPE_CHANGED,
        `the scope grew since the plan (${uncovered.slice(0, 5).join(', ')}${uncovered.length > 5 ? ` and ${uncovered.length - 5} more` : ''} not reserved by this run): nothing applied; run kl plan again`,
      );
    }
  });
  if (proven.kind === 'unproven') {
    throw new DomainError(
      SCOPE_CHANGED,
      `the server can no longer prove the scope safe (${proven.expanded.reasons.join('; ')}): nothing applied; run kl plan again`,
    );
  }
  if (proven.kind === 'changing') {
    throw new DomainError(
      SCOPE_CHANGED,
      'the state kept changing between scope expansion and slice: nothing applied; run kl apply again',
    );
  }
  return { lane, slice: proven.slice.document, version: proven.slice.version };
}

/** A stale scope is a stale plan. */
const SCOPE_CHANGED = 'APPLY.STALE';

/**
 * Is an address among, or covered by, what the run holds? Indexed once: a
 * scope of 20,000 addresses beside as many held globs, one against each,
 * was 400 million comparisons.
 */
function coverage(held: string[]): (address: string) => boolean {
  const texts = new Set(held);
  const globs = new GlobIndex<true>();
  for (const g of held) {
    try {
      globs.add(parseAddressGlob(g), true);
    } catch {
      // not a glob: only equal text covers it
    }
  }
  return (address) => {
    if (texts.has(address)) return true;
    try {
      return globs.covers(parseInstanceAddress(address));
    } catch {
      return false; // not an address: only equal text covers it
    }
  };
}

function countInstances(d: StateDocumentV4): number {
  return d.resources.reduce((n, r) => n + r.instances.length, 0);
}

/**
 * The trusted lane reserves the whole of the server's scope contract on top
 * of what the plan writes and reads: its dependency closure for read, and
 * what it would reserve for write but the plan does not change (support
 * nodes copied from other files, say) for read too. Writes stay exactly
 * the plan's: terraform is held to them, and two scopes sharing a support
 * node they only read can still apply side by side.
 */
export function laneReservations(
  planned: { write: string[]; read: string[] },
  server: { write: string[]; read: string[] } | null,
): { write: string[]; read: string[] } {
  if (server === null) return planned;
  const write = [...planned.write];
  const writes = new Set(write);
  const read = [...new Set([...planned.read, ...server.read, ...server.write])]
    .filter((g) => !writes.has(g))
    .sort();
  return { write, read };
}
