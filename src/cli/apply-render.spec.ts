import { Holder } from '../application/apply/apply-server.port';
import { parseDuration } from './durations';
import { describeConflict, groupDigits, renderLane } from './apply-render';
import { KlPlan } from '../domain/apply/kl-plan';
import { formatDuration } from './durations';

describe('apply rendering', () => {
  const now = Date.parse('2026-11-30T12:00:00Z');

  it('prints a conflict like the ADR: glob, actor, run, age, expiry', () => {
    const holder: Holder = {
      glob: 'module.web.*',
      mode: 'write',
      actor: 'alice',
      runId: 'ar_4f2a',
      lockId: '',
      kind: 'apply',
      acquiredAt: '2026-11-30T11:59:48Z',
      expiresAt: '2026-11-30T12:14:48Z',
    };
    expect(describeConflict([holder], now)).toBe(
      'reservation conflict on module.web.*:\n  held by alice (run ar_4f2a, acquired 12s ago, expires in 14m48s)',
    );
  });

  it('names a Terraform lock by its LockInfo', () => {
    const holder: Holder = {
      glob: '*',
      mode: 'write',
      actor: 'bob',
      runId: '',
      lockId: '5b1c-lock',
      kind: 'terraform-lock',
      acquiredAt: '2026-11-30T11:59:57Z',
      expiresAt: null,
      lockInfo: { ID: '5b1c-lock', Who: 'bob@laptop', Operation: 'OperationTypeApply' },
    };
    expect(describeConflict([holder], now)).toBe(
      'reservation conflict on *:\n  held by a Terraform lock of bob@laptop (lock 5b1c-lock, OperationTypeApply, acquired 3s ago)',
    );
  });

  it.each([
    [0, '0s'],
    [59_400, '59s'],
    [60_000, '1m0s'],
    [888_000, '14m48s'],
    [7_500_000, '2h5m'],
  ])('formats %d ms as %s', (ms, text) => expect(formatDuration(ms)).toBe(text));

  it.each([
    ['90', 90],
    ['90s', 90],
    ['15m', 900],
    ['1h30m', 5400],
    ['1h2m3s', 3723],
    ['', null],
    ['soon', null],
    ['-5', null],
    ['1.5m', null],
  ])('reads the duration %j as %j seconds', (text, seconds) =>
    expect(parseDuration(text)).toBe(seconds),
  );

  it("groups the whole state's instance count in thousands like toLocaleString(en-US)", () => {
    for (const n of [0, 7, 999, 1000, 20008, 100008, 1234567, 987654321012]) {
      expect(groupDigits(n)).toBe(n.toLocaleString('en-US'));
    }
    const plan = {
      lane: 'state-engine',
      laneReasons: [],
      scope: {
        provablySafe: true,
        unresolved: [],
        closure: [],
        slice: { instances: 2, bytes: 6387, stateInstances: 100008 },
      },
    } as unknown as KlPlan;
    expect(renderLane(plan)).toContain(
      '  slice: 2 of 100,008 instances, 6.2 KiB fetched (not the whole state)',
    );
  });
});
