import { evolve } from './state.evolve';
import { StateEvent } from './state.events';
import { initialState, StateAggregate } from './state.model';
import { fromSnapshot, toSnapshot, toSnapshotText } from './state.snapshot';

const resource = (name: string) => ({
  module: '',
  mode: 'managed' as const,
  type: 'terraform_data',
  name,
  provider: 'provider["terraform.io/builtin/terraform"]',
  each: 'list' as const,
});

/** A state of `instances` instances over `resources` resources, commits, a lock and two runs. */
function stateWith(instances: number, resources: number, globs: number): StateAggregate {
  const events: StateEvent[] = [{ type: 'StateCreated', data: { stateId: 's1', name: 'big' } }];
  for (const version of [1, 2]) {
    events.push({
      type: 'ApplyCommitted',
      data: {
        stateId: 's1',
        version,
        serial: version,
        lineage: 'lin',
        source: 'http',
        terraformVersion: '1.11.4',
        outputs: Object.fromEntries(
          Array.from({ length: instances }, (_, i) => [`out${i}`, { value: i, type: 'number' }]),
        ),
        checkResults: null,
        extra: { note: 'kept' },
        checksum: `sum${version}`,
        instanceCount: instances,
        resourceCount: resources,
      },
    });
    for (let i = 0; i < instances; i++) {
      if (version === 2 && i % 3 !== 0) continue;
      const address = `terraform_data.r${i % resources}[${i}]`;
      events.push(
        version === 2 && i % 2 === 0
          ? {
              type: 'LifecycleClosed',
              data: { stateId: 's1', version, serial: version, address, hash: `h${i}` },
            }
          : {
              type: 'LifecycleOpened',
              data: {
                stateId: 's1',
                version,
                serial: version,
                address,
                hash: `h${version}-${i}`,
                resource: resource(`r${i % resources}`),
                instance: { index_key: i, schema_version: 0, attributes: { i } },
              },
            },
      );
    }
  }
  events.push({
    type: 'LockAcquired',
    data: {
      stateId: 's1',
      lockId: 'L1',
      info: {
        ID: 'L1',
        Operation: 'OperationTypePlan',
        Info: '',
        Who: 'me',
        Version: '',
        Created: '',
        Path: '',
      },
      mode: 'read',
      acquiredAt: '2026-12-02T12:00:00.000Z',
    },
  });
  for (const runId of ['run-a', 'run-b']) {
    for (let i = 0; i < globs; i++) {
      events.push({
        type: 'ReservationAcquired',
        data: {
          stateId: 's1',
          reservationId: `${runId}-${i}`,
          runId,
          glob: `module.m${i}.aws_instance.${runId}[*]`,
          mode: i % 2 === 0 ? 'write' : 'read',
          holder: 'ci',
          ...(i === 0 ? { info: { run: runId } } : {}),
          acquiredAt: '2026-12-02T12:00:00.000Z',
          expiresAt: '2026-12-02T12:15:00.000Z',
        },
      });
    }
  }
  return events.reduce(evolve, initialState());
}

describe('a state snapshot as JSON text in pieces', () => {
  it('is exactly the JSON of the snapshot, and loads back as the state', () => {
    const states = [
      initialState(),
      stateWith(2_500, 40, 1_200), // lists of several pieces, the last one short
      stateWith(3_000, 3_000, 1_000), // lists of whole pieces only
      stateWith(0, 1, 0), // empty lists
      evolve(stateWith(3, 1, 0), { type: 'StateDeleted', data: { stateId: 's1' } }),
    ];
    for (const state of states) {
      const text = [...toSnapshotText(state)].join('');
      expect(text).toBe(JSON.stringify(toSnapshot(state)));
      expect(fromSnapshot(JSON.parse(text))).toEqual(state);
    }
  });

  it('reads a big state a thousand entries at a time', () => {
    const state = stateWith(20_000, 50, 2_000);
    const pieces = [...toSnapshotText(state)];
    // Instances, output hashes, outputs and changed addresses 20 pieces each, reservations 4.
    expect(pieces.length).toBeGreaterThan(60);
    expect(Math.max(...pieces.map((p) => p.length))).toBeLessThan(pieces.join('').length / 20);
  });
});
