import { recordedPlan, recordedState } from './__fixtures__/fixtures';
import { applySets, OUTPUT_GLOB_PREFIX, stateDependencies } from './apply-sets';
import { ModuleLocals } from './config-graph';
import { parsePlanJson } from './plan-json';

const rootLocals: ModuleLocals = new Map([
  ['prefix', ['var.env']],
  ['marker', ['terraform_data.marker.output', 'terraform_data.marker']],
]);
const known = (path: readonly string[]) => (path.length === 0 ? rootLocals : new Map());

describe('applySets (recorded plan)', () => {
  const plan = parsePlanJson(recordedPlan());
  const state = recordedState();
  const sets = applySets(plan, state, known, { scoped: false });

  it('reads upstream and downstream of the write set, not siblings that share an upstream', () => {
    expect(sets.readSet).toEqual([
      // upstream of module.web's servers, through var.subnet_id → module.network.subnet_id
      'module.network.terraform_data.subnet',
      'module.network.terraform_data.vpc',
      // downstream: the load balancer reads every server
      'module.web.terraform_data.lb',
      // upstream of terraform_data.new, only through local.marker
      'terraform_data.marker',
    ]);
    // module.db reads the same network, but neither reads nor is read by what changes.
    expect(sets.readSet.some((a) => a.startsWith('module.db.'))).toBe(false);
    expect(sets.readSet).not.toContain('terraform_data.slow_b');
  });

  it('reserves outputs that read a written resource or anything downstream of one', () => {
    expect(sets.outputWrites).toEqual(['slow_a', 'web_url']);
    expect(sets.reservations.write).toEqual(
      expect.arrayContaining([`${OUTPUT_GLOB_PREFIX}slow_a`, `${OUTPUT_GLOB_PREFIX}web_url`]),
    );
  });

  it('collapses a module to a glob only when every known address in it is reserved the same way', () => {
    expect(sets.reservations.read).toEqual([
      'module.network.*',
      'module.web.terraform_data.lb',
      'terraform_data.marker',
    ]);
    // module.web also holds the (read) load balancer, so its servers stay literal.
    expect(sets.reservations.write).toEqual([
      'module.web.terraform_data.server[0]',
      'module.web.terraform_data.server[1]',
      'terraform_data.new[0]',
      'terraform_data.old[0]',
      'terraform_data.slow_a',
      'output.slow_a',
      'output.web_url',
    ]);
  });

  it('needs the HCL locals to see what a local value reads', () => {
    const withoutLocals = applySets(plan, state, () => new Map(), { scoped: false });
    expect(withoutLocals.readSet).not.toContain('terraform_data.marker');
  });

  it('assumes the worst for a module whose locals are unknown', () => {
    const unknown = applySets(plan, state, () => undefined, { scoped: false });
    // Every root resource might be behind local.marker.
    expect(unknown.readSet).toEqual(
      expect.arrayContaining(['terraform_data.marker', 'terraform_data.slow_b']),
    );
  });

  it('uses the dependencies recorded in state as edges too', () => {
    const deps = stateDependencies(state);
    expect(deps.get('module.web.terraform_data.lb')).toEqual(
      expect.arrayContaining(['module.web.terraform_data.server']),
    );
    const emptyConfig = { ...plan, configuration: {} };
    const fromState = applySets(emptyConfig, state, known, { scoped: false });
    expect(fromState.readSet).toContain('module.web.terraform_data.lb');
    expect(fromState.readSet).toContain('module.network.terraform_data.vpc');
  });

  it('in a scoped plan, leaves alone the outputs terraform would plan away', () => {
    const raw = recordedPlan() as { output_changes: Record<string, unknown> };
    raw.output_changes.elsewhere = { actions: ['delete'] };
    const scoped = applySets(parsePlanJson(raw), state, known, { scoped: true });
    expect(scoped.outputWrites).not.toContain('elsewhere');
    const unscoped = applySets(parsePlanJson(raw), state, known, { scoped: false });
    expect(unscoped.outputWrites).toContain('elsewhere');
  });
});
