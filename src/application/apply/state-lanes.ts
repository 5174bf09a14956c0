import { ApplyLane } from '../../domain/apply/apply-run.events';
import { PlanScope } from '../../domain/apply/kl-plan';
import { Footprint, sliceOf } from '../../domain/apply/state-slice';
import { DomainError } from '../../domain/shared/domain-error';
import { globCovers, parseAddressGlob } from '../../domain/reservations';
import { parseInstanceAddress } from '../../domain/terraform/instance-address';
import type { StateDocumentV4 } from '../../domain/terraform/state-document';
import { ApplyServerPort, EngineCandidates, EngineOffer } from './apply-server.port';

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
 * `kl plan`'s lane. With protocol http, the full-trunk lane. Otherwise the
 * server expands the scope of the `-f` footprint; only when it proves the
 * scope safe does kl fetch just that slice and plan for the trusted lane.
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
  // Protocol state-engine says the server has the lane: the scope (and with it the slice) is
  // asked beside the offer, not after it. The offer still decides whether the answer is used.
  const early =
    protocol === 'state-engine' && footprint !== null
      ? server.expandScope(state, candidatesOf(footprint), { withSlice: true })
      : null;
  early?.catch(() => undefined); // awaited below; unawaited when the offer rules it out
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
  if (footprint === null) {
    return full([
      `protocol ${protocol}: without -f the whole configuration is in scope, so the full-trunk lane`,
    ]);
  }
  const candidates = candidatesOf(footprint);
  // One exchange when the server answers the scope with its slice; else scope, then slice.
  const combined = offered.operations.includes(SCOPE_WITH_SLICE);
  // The state's instance count is metadata the plan only reports: asked beside the expansion
  // (a combined answer carries it).
  const stateInstances = combined ? null : server.engineInstanceCount(state);
  stateInstances?.catch(() => undefined); // awaited with the slice; unawaited when falling back
  // The proof and the slice must be of one version: a write in between means asking again.
  for (let attempt = 1; ; attempt++) {
    const expanded = await (attempt === 1 && combined && early !== null
      ? early
      : server.expandScope(state, candidates, { withSlice: combined }));
    const scope: PlanScope = {
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
    if (!expanded.provablySafe) {
      return full(
        [
          `protocol ${protocol}: the server cannot prove the scope safe (${expanded.reasons.join('; ')}), so kl falls back to the full-trunk lane`,
        ],
        scope,
      );
    }
    // Only a proven scope's slice is used, and only with the version it was proven at.
    const slice = expanded.slice ?? (await server.slice(state, candidates));
    if (slice.version !== expanded.version && attempt < 3) continue;
    if (slice.version !== expanded.version) {
      return full(
        [
          `protocol ${protocol}: the state kept changing between scope expansion and slice, so kl falls back to the full-trunk lane`,
        ],
        scope,
      );
    }
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
}

/**
 * `kl apply`'s state: the lane its plan chose, read again at the current
 * version. The trusted lane is taken only on a scope the server proves safe
 * now, not only when it was planned: the state may have changed since (a
 * dependency removed, a new dependent), so the scope is expanded again and
 * must still be provable, and everything it now reserves must be among
 * what the run holds (`reserved`: the plan's reservations). Otherwise
 * nothing is applied and kl says to plan again.
 */
export async function laneState(
  server: ApplyServerPort,
  lane: ApplyLane,
  state: string,
  footprint: Footprint,
  reserved: { write: string[]; read: string[] } = { write: [], read: [] },
): Promise<LaneState> {
  if (lane === 'full' || footprint === null) return fullTrunk(server, state, footprint);
  for (let attempt = 1; ; attempt++) {
    const expanded = await server.expandScope(state, candidatesOf(footprint));
    if (!expanded.provablySafe) {
      throw new DomainError(
        SCOPE_CHANGED,
        `the server can no longer prove the scope safe (${expanded.reasons.join('; ')}): nothing applied; run kl plan again`,
      );
    }
    const held = [...reserved.write, ...reserved.read];
    const uncovered = [...expanded.reservations.write, ...expanded.reservations.read].filter(
      (a) => !held.some((g) => g === a || covers(g, a)),
    );
    if (uncovered.length > 0) {
      throw new DomainError(
        SCOPE_CHANGED,
        `the scope grew since the plan (${uncovered.slice(0, 5).join(', ')}${uncovered.length > 5 ? ` and ${uncovered.length - 5} more` : ''} not reserved by this run): nothing applied; run kl plan again`,
      );
    }
    const slice = await server.slice(state, candidatesOf(footprint));
    if (slice.version === expanded.version) {
      return { lane, slice: slice.document, version: slice.version };
    }
    if (attempt >= 3) {
      throw new DomainError(
        SCOPE_CHANGED,
        'the state kept changing between scope expansion and slice: nothing applied; run kl apply again',
      );
    }
  }
}

/** A stale scope is a stale plan. */
const SCOPE_CHANGED = 'APPLY.STALE';

function covers(glob: string, address: string): boolean {
  try {
    return globCovers(parseAddressGlob(glob), parseInstanceAddress(address));
  } catch {
    return false; // not a glob or not an address: only equal text covers it
  }
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
  const read = [...new Set([...planned.read, ...server.read, ...server.write])]
    .filter((g) => !write.includes(g))
    .sort();
  return { write, read };
}
