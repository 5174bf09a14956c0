import { DomainError } from '../../domain/shared/domain-error';
import { StateDocumentV4 } from '../../domain/terraform';
import { EngineCandidates, EngineOffer, EngineScope } from './apply-server.port';
import { candidatesOf, chooseLane, laneReservations, laneState } from './state-lanes';

const resource = (name: string, module?: string) => ({
  ...(module ? { module } : {}),
  mode: 'managed' as const,
  type: 'terraform_data',
  name,
  provider: 'provider["terraform.io/builtin/terraform"]',
  instances: [{ schema_version: 0, attributes: { id: name } }],
});

const trunk: StateDocumentV4 = {
  version: 4,
  terraform_version: '1.11.4',
  serial: 9,
  lineage: 'L',
  outputs: {},
  resources: [resource('app'), resource('base'), resource('x', 'module.net')],
};

const safe: EngineScope = {
  version: 7,
  scope: [{ address: 'terraform_data.app', instances: ['terraform_data.app'] }],
  closure: [
    {
      address: 'terraform_data.base',
      direction: 'dependency',
      via: 'terraform_data.app',
      reason: 'terraform_data.app depends on it',
    },
  ],
  unresolved: [
    { candidate: 'terraform_data.support', kind: 'address', classification: 'undeployed' },
  ],
  reservations: {
    write: ['terraform_data.app', 'terraform_data.support'],
    read: ['terraform_data.base'],
  },
  provablySafe: true,
  reasons: [],
};

const LANE = ['scope', 'slice', 'runs', 'delta-commit', 'state-rm'];
/** A server from before the combined exchange: scope, then slice. */
const SEPARATE = { protocolVersion: 1, operations: LANE };

/**
 * A server that records what kl read from it. It answers a scope asked
 * `withSlice` with the slice when the scope is provably safe (or always,
 * with `sliceUnproven`, to show kl does not use it then).
 */
function server(
  options: {
    offer?: EngineOffer | null;
    scopes?: EngineScope[];
    sliceVersions?: number[];
    sliceUnproven?: boolean;
  } = {},
) {
  const reads: string[] = [];
  const scopes = [...(options.scopes ?? [safe])];
  const sliceVersions = [...(options.sliceVersions ?? [])];
  const sliced = (bytes: number) => ({
    document: { ...trunk, resources: [resource('app')] },
    version: sliceVersions.shift() ?? 7,
    bytes,
  });
  const names = (c: EngineCandidates) => [...c.addresses, ...c.modulePrefixes].join(',');
  return {
    reads,
    async trunk() {
      reads.push('trunk');
      return { document: trunk, version: 7 };
    },
    async engineOffer() {
      return options.offer === undefined
        ? { protocolVersion: 1, operations: [...LANE, 'scope-slice'] }
        : options.offer;
    },
    async engineInstanceCount() {
      reads.push('count');
      return 20_008;
    },
    async expandScope(_s: string, c: EngineCandidates, o?: { withSlice?: boolean }) {
      reads.push(`${o?.withSlice ? 'scope+slice' : 'scope'} ${names(c)}`);
      const answer = scopes.length > 1 ? scopes.shift()! : scopes[0];
      if (!o?.withSlice) return answer;
      const withSlice = answer.provablySafe || options.sliceUnproven === true;
      return { ...answer, instanceCount: 20_008, ...(withSlice ? { slice: sliced(654) } : {}) };
    },
    async slice(_s: string, c: EngineCandidates) {
      reads.push(`slice ${names(c)}`);
      return sliced(321);
    },
    acquire: jest.fn(),
    heartbeat: jest.fn(),
    commit: jest.fn(),
    finish: jest.fn(),
  };
}

const FOOTPRINT = ['terraform_data.app', 'terraform_data.support'];

describe('the lanes of kl plan and kl apply', () => {
  it('sends module calls as prefixes and the rest as addresses', () => {
    expect(candidatesOf(['data.x.y', 'module.net', 'terraform_data.a'])).toEqual({
      addresses: ['data.x.y', 'terraform_data.a'],
      modulePrefixes: ['module.net'],
    });
  });

  it('protocol http: the whole trunk, sliced here; the server is not asked for a scope', async () => {
    const s = server();
    const choice = await chooseLane(s, 'http', 'st', FOOTPRINT);
    expect(choice).toMatchObject({ lane: 'full', version: 7, scope: null });
    expect(choice.slice.resources.map((r) => r.name)).toEqual(['app']);
    expect(s.reads).toEqual(['trunk']);
  });

  it.each(['auto', 'state-engine'] as const)(
    'protocol %s and a provable scope: one exchange answers the scope with its slice, for the trusted lane with the server reservations',
    async (protocol) => {
      const s = server();
      const choice = await chooseLane(s, protocol, 'st', FOOTPRINT);
      expect(s.reads).toEqual(['scope+slice terraform_data.app,terraform_data.support']);
      expect(choice).toMatchObject({
        lane: 'state-engine',
        version: 7,
        serverReservations: safe.reservations,
        scope: {
          provablySafe: true,
          unresolved: [{ candidate: 'terraform_data.support', classification: 'undeployed' }],
          slice: { instances: 1, bytes: 654, stateInstances: 20_008 },
        },
      });
      expect(choice.reasons[0]).toContain('the server proved the scope safe');
    },
  );

  it('a server without the combined exchange: the scope, then only the slice, the count beside', async () => {
    const s = server({ offer: SEPARATE });
    const choice = await chooseLane(s, 'auto', 'st', FOOTPRINT);
    expect(s.reads.filter((r) => r !== 'count')).toEqual([
      'scope terraform_data.app,terraform_data.support',
      'slice terraform_data.app,terraform_data.support',
    ]);
    expect(choice).toMatchObject({
      lane: 'state-engine',
      scope: { slice: { instances: 1, bytes: 321, stateInstances: 20_008 } },
    });
  });

  it('protocol state-engine asks the scope beside the offer, but uses it only when the offer lists the combined exchange', async () => {
    const s = server({ offer: SEPARATE, sliceUnproven: true });
    const choice = await chooseLane(s, 'state-engine', 'st', FOOTPRINT);
    // The early answer (its slice included) is dropped: the lane asks the way the offer says.
    expect(s.reads.filter((r) => r !== 'count')).toEqual([
      'scope+slice terraform_data.app,terraform_data.support',
      'scope terraform_data.app,terraform_data.support',
      'slice terraform_data.app,terraform_data.support',
    ]);
    expect(choice.scope?.slice?.bytes).toBe(321);
  });

  it("never uses a slice that came without the server's proof", async () => {
    const s = server({
      scopes: [{ ...safe, provablySafe: false, reasons: ['terraform_data.x has no edges'] }],
      sliceUnproven: true,
    });
    const choice = await chooseLane(s, 'state-engine', 'st', FOOTPRINT);
    expect(choice.lane).toBe('full');
    expect(choice.serverReservations).toBeUndefined();
    expect(choice.slice.resources.map((r) => r.name)).toEqual(['app']);
    expect(s.reads).toEqual(['scope+slice terraform_data.app,terraform_data.support', 'trunk']);
  });

  it('asks again when the slice in the answer is not of the version the scope was proven at', async () => {
    const s = server({ sliceVersions: [8, 7] });
    const choice = await chooseLane(s, 'state-engine', 'st', FOOTPRINT);
    expect(choice).toMatchObject({ lane: 'state-engine', version: 7 });
    expect(s.reads).toEqual([
      'scope+slice terraform_data.app,terraform_data.support',
      'scope+slice terraform_data.app,terraform_data.support',
    ]);
    const moving = server({ sliceVersions: [8, 9, 10] });
    const fallback = await chooseLane(moving, 'state-engine', 'st', FOOTPRINT);
    expect(fallback.lane).toBe('full');
    expect(fallback.reasons[0]).toContain('the state kept changing');
  });

  it('an unprovable scope falls back to the full trunk and says why', async () => {
    const s = server({
      scopes: [
        {
          ...safe,
          provablySafe: false,
          reasons: ['module module.fresh matches nothing in this state, now or before'],
        },
      ],
    });
    const choice = await chooseLane(s, 'state-engine', 'st', [...FOOTPRINT, 'module.fresh']);
    expect(choice.lane).toBe('full');
    expect(choice.serverReservations).toBeUndefined();
    expect(choice.scope?.provablySafe).toBe(false);
    expect(choice.reasons[0]).toMatch(
      /cannot prove the scope safe \(module module.fresh matches nothing.*\), so kl falls back to the full-trunk lane/,
    );
    expect(s.reads).toEqual([
      'scope+slice terraform_data.app,terraform_data.support,module.fresh',
      'trunk',
    ]);
  });

  it('asks again when the state changed between the proof and the slice', async () => {
    const s = server({ offer: SEPARATE, sliceVersions: [8, 7] });
    const choice = await chooseLane(s, 'auto', 'st', FOOTPRINT);
    expect(choice.lane).toBe('state-engine');
    expect(s.reads.filter((r) => r.startsWith('scope'))).toHaveLength(2);
  });

  it('without -f there is no scope to expand: the full trunk', async () => {
    const s = server();
    const choice = await chooseLane(s, 'state-engine', 'st', null);
    expect(choice.lane).toBe('full');
    expect(choice.reasons[0]).toContain('without -f');
    expect(s.reads).toEqual(['trunk']);
  });

  it('auto on a server without the lane (or another protocol version): the full trunk', async () => {
    for (const offer of [
      null,
      { protocolVersion: 2, operations: ['scope', 'slice', 'runs', 'delta-commit'] },
      { protocolVersion: 1, operations: ['scope'] },
    ]) {
      const s = server({ offer });
      const choice = await chooseLane(s, 'auto', 'st', FOOTPRINT);
      expect(choice.lane).toBe('full');
      expect(choice.reasons[0]).toContain('the server offers no state-engine lane');
      expect(s.reads).toEqual(['trunk']);
    }
  });

  it('protocol state-engine on a server without the lane is a configuration error', async () => {
    const s = server({ offer: null });
    const failure = chooseLane(s, 'state-engine', 'st', FOOTPRINT);
    await expect(failure).rejects.toThrow(DomainError);
    await expect(failure).rejects.toThrow(/offers no state-engine lane.*use protocol http or auto/);
    // Only the scope asked beside the offer: no slice, no trunk.
    expect(s.reads).toEqual(['scope+slice terraform_data.app,terraform_data.support']);
  });

  // What a trusted plan of FOOTPRINT reserves: its write, and the server's contract for read.
  const planned = {
    write: ['terraform_data.app'],
    read: ['terraform_data.base', 'terraform_data.support'],
  };

  it("kl apply reads the plan's lane again: the scope with its slice in one exchange on the trusted lane, the trunk otherwise", async () => {
    const s = server();
    expect(
      (await laneState(s, 'state-engine', 'st', FOOTPRINT, planned)).slice.resources,
    ).toHaveLength(1);
    expect((await laneState(s, 'full', 'st', FOOTPRINT, planned)).slice.resources).toHaveLength(1);
    expect(s.reads).toEqual(['scope+slice terraform_data.app,terraform_data.support', 'trunk']);
  });

  it('kl apply on a server without the combined exchange drops the early answer: the scope, then the slice', async () => {
    const s = server({ offer: SEPARATE, sliceUnproven: true });
    const state = await laneState(s, 'state-engine', 'st', FOOTPRINT, planned);
    expect(state).toMatchObject({ lane: 'state-engine', version: 7 });
    expect(s.reads).toEqual([
      'scope+slice terraform_data.app,terraform_data.support',
      'scope terraform_data.app,terraform_data.support',
      'slice terraform_data.app,terraform_data.support',
    ]);
  });

  it('kl apply refuses when the server no longer offers the lane: nothing read but the early scope', async () => {
    const s = server({ offer: null });
    await expect(laneState(s, 'state-engine', 'st', FOOTPRINT, planned)).rejects.toThrow(
      /no longer offers the state-engine lane this plan was made for: nothing applied; run kl plan again/,
    );
    expect(s.reads).toEqual(['scope+slice terraform_data.app,terraform_data.support']);
  });

  it('kl apply proves the scope again: one no longer provable is refused, its slice (if any came) unused', async () => {
    const s = server({
      scopes: [
        { ...safe, provablySafe: false, reasons: ['terraform_data.gone is not in this state'] },
      ],
      sliceUnproven: true,
    });
    const refused = laneState(s, 'state-engine', 'st', FOOTPRINT, planned);
    await expect(refused).rejects.toThrow(DomainError);
    await expect(refused).rejects.toThrow(
      /can no longer prove the scope safe \(terraform_data.gone is not in this state\): nothing applied; run kl plan again/,
    );
    expect(s.reads).toEqual(['scope+slice terraform_data.app,terraform_data.support']);
    // The same on a server that answers scope, then slice: no slice is asked.
    const separate = server({
      offer: SEPARATE,
      scopes: [{ ...safe, provablySafe: false, reasons: ['terraform_data.gone is gone'] }],
    });
    await expect(laneState(separate, 'state-engine', 'st', FOOTPRINT, planned)).rejects.toThrow(
      /can no longer prove the scope safe/,
    );
    expect(separate.reads.some((r) => r.startsWith('slice'))).toBe(false);
  });

  it('kl apply asks again when the slice is not of the version the scope was proven at, and gives up after three', async () => {
    const s = server({ sliceVersions: [8, 7] });
    expect(await laneState(s, 'state-engine', 'st', FOOTPRINT, planned)).toMatchObject({
      lane: 'state-engine',
      version: 7,
    });
    expect(s.reads).toEqual([
      'scope+slice terraform_data.app,terraform_data.support',
      'scope+slice terraform_data.app,terraform_data.support',
    ]);
    const moving = server({ sliceVersions: [8, 9, 10] });
    await expect(laneState(moving, 'state-engine', 'st', FOOTPRINT, planned)).rejects.toThrow(
      /the state kept changing between scope expansion and slice: nothing applied; run kl apply again/,
    );
    expect(moving.reads).toHaveLength(3);
  });

  it('kl apply refuses a scope that grew past what the run reserved, though its slice came with it', async () => {
    const grown: EngineScope = {
      ...safe,
      reservations: { ...safe.reservations, read: ['terraform_data.base', 'terraform_data.new'] },
    };
    const s = server({ scopes: [grown] });
    await expect(laneState(s, 'state-engine', 'st', FOOTPRINT, planned)).rejects.toThrow(
      /the scope grew since the plan \(terraform_data.new not reserved by this run\)/,
    );
    expect(s.reads).toEqual(['scope+slice terraform_data.app,terraform_data.support']);
    // On a server that answers scope, then slice, the slice is not even asked.
    const separate = server({ offer: SEPARATE, scopes: [grown] });
    await expect(laneState(separate, 'state-engine', 'st', FOOTPRINT, planned)).rejects.toThrow(
      /the scope grew since the plan/,
    );
    expect(separate.reads.some((r) => r.startsWith('slice'))).toBe(false);
    // A glob the run holds covers it.
    const wide = { ...planned, read: [...planned.read, '*'] };
    const ok = await laneState(server({ scopes: [grown] }), 'state-engine', 'st', FOOTPRINT, wide);
    expect(ok.lane).toBe('state-engine');
  });

  it("the trusted lane reserves the server's scope contract: what the plan does not write, for read", () => {
    expect(
      laneReservations(
        { write: ['terraform_data.app', 'output.a'], read: ['terraform_data.x'] },
        {
          write: ['terraform_data.app', 'terraform_data.shared', 'terraform_data.support'],
          read: ['terraform_data.base'],
        },
      ),
    ).toEqual({
      write: ['terraform_data.app', 'output.a'],
      read: [
        'terraform_data.base',
        'terraform_data.shared',
        'terraform_data.support',
        'terraform_data.x',
      ],
    });
    const planned = { write: ['terraform_data.app'], read: ['terraform_data.app'] };
    expect(laneReservations(planned, null)).toBe(planned);
  });
});
