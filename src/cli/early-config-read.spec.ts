import { scopedPlanDir } from './early-config-read';

describe('scopedPlanDir', () => {
  it('names the directory of a kl plan with -f, wherever the options are', () => {
    expect(scopedPlanDir(['plan', '-f', 'marker.tf'])).toBe('.');
    expect(scopedPlanDir(['plan', 'infra', '-f', 'a.tf'])).toBe('infra');
    expect(
      scopedPlanDir(['--server', 'http://x', 'plan', '-o', 'p.json', '-f', 'a.tf', 'infra']),
    ).toBe('infra');
    expect(scopedPlanDir(['plan', '--file=a.tf', '--state', 'plan', '--no-refresh', 'infra'])).toBe(
      'infra',
    );
    expect(scopedPlanDir(['plan', '-fa.tf', '--', '-dir'])).toBe('-dir');
  });

  it('is null for every other command line, so nothing is started for it', () => {
    expect(scopedPlanDir(['plan'])).toBeNull();
    expect(scopedPlanDir(['plan', 'infra', '--target', 'a.b'])).toBeNull();
    expect(scopedPlanDir(['plan', '-f', 'a.tf', '--help'])).toBeNull();
    expect(scopedPlanDir(['apply', 'kl-plan.json'])).toBeNull();
    expect(scopedPlanDir(['states', '-f', 'x'])).toBeNull();
    expect(scopedPlanDir([])).toBeNull();
  });
});
