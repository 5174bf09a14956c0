import type { RecordedEvent } from './event';
import { Upcasters } from './upcasting';

const recorded = (type: string, schemaVersion: number, data: unknown): RecordedEvent => ({
  eventId: '00000000-0000-4000-8000-000000000001',
  type,
  schemaVersion,
  data,
  metadata: {
    actor: 'a',
    correlationId: 'c',
    causationId: null,
    occurredAt: '2026-01-01T00:00:00Z',
  },
  streamId: 'state-x',
  streamRevision: 0n,
  position: { transactionId: 1n, globalPosition: 1n },
});

describe('Upcasters', () => {
  const upcasters = new Upcasters([
    // v1 → v2: `owner` was renamed `holder`; v2 → v3: `holder` became a list.
    { type: 'Held', from: 2, upcast: (d) => ({ holders: [(d as { holder: string }).holder] }) },
    { type: 'Held', from: 1, upcast: (d) => ({ holder: (d as { owner: string }).owner }) },
  ]);

  it('brings an old event to the current shape, step by step, keeping everything else', () => {
    const old = recorded('Held', 1, { owner: 'alice' });
    expect(upcasters.upcast(old)).toEqual({
      ...old,
      schemaVersion: 3,
      data: { holders: ['alice'] },
    });
    expect(upcasters.upcast(recorded('Held', 2, { holder: 'bob' })).data).toEqual({
      holders: ['bob'],
    });
  });

  it('leaves current events and types without upcasters as they are', () => {
    const current = recorded('Held', 3, { holders: [] });
    expect(upcasters.upcast(current)).toBe(current);
    const other = recorded('StateCreated', 1, { name: 'x' });
    expect(upcasters.upcast(other)).toBe(other);
  });

  it('says which version writers write', () => {
    expect(upcasters.currentVersion('Held')).toBe(3);
    expect(upcasters.currentVersion('StateCreated')).toBe(1);
  });

  it('refuses a chain with a missing step or two steps from one version', () => {
    expect(() => new Upcasters([{ type: 'T', from: 2, upcast: (d) => d }])).toThrow(
      'no upcaster of T from version 1 to 2',
    );
    expect(
      () =>
        new Upcasters([
          { type: 'T', from: 1, upcast: (d) => d },
          { type: 'T', from: 1, upcast: (d) => d },
        ]),
    ).toThrow('two upcasters of T from version 1');
  });
});
