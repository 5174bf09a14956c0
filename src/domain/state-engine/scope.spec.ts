import {
  addressCandidate,
  candidateCovers,
  expandScope,
  moduleCandidate,
  parsedAddress,
  selectorCandidate,
} from './scope';

describe('scope candidates', () => {
  it('match instances as reservation globs do, selectors by type too', () => {
    const at = parsedAddress('module.net[0].aws_subnet.a["x"]');
    expect(candidateCovers(moduleCandidate('module.net'), at)).toBe(true);
    expect(candidateCovers(moduleCandidate('module.net[1]'), at)).toBe(false);
    expect(candidateCovers(addressCandidate('module.net.aws_subnet.a'), at)).toBe(true);
    expect(candidateCovers(addressCandidate('aws_subnet.a'), at)).toBe(false);
    expect(candidateCovers(selectorCandidate({ type: 'aws_subnet' }), at)).toBe(true);
    expect(candidateCovers(selectorCandidate({ type: 'aws_vpc' }), at)).toBe(false);
    expect(
      candidateCovers(selectorCandidate({ type: 'aws_subnet', module: 'module.app' }), at),
    ).toBe(false);
  });

  it('refuse what they cannot be', () => {
    expect(() => addressCandidate('module.net')).toThrow(/module_prefixes/);
    expect(() => moduleCandidate('aws_vpc.main')).toThrow(/not a module path/);
    expect(() => addressCandidate('x y')).toThrow(/addresses/);
  });
});

describe('expandScope', () => {
  const base = {
    seenBefore: new Set<number>(),
    dependencies: [],
    dependents: [],
    realized: new Set<string>(),
  };

  it('cannot prove a scope whose dependency is not in the state', () => {
    const answer = expandScope({
      ...base,
      candidates: [addressCandidate('aws_instance.web')],
      matched: [[{ address: 'aws_instance.web[0]', resourceAddress: 'aws_instance.web' }]],
      dependencies: [{ address: 'aws_subnet.gone', via: 'aws_instance.web' }],
    });
    expect(answer.provably_safe).toBe(false);
    expect(answer.reasons).toEqual([
      'aws_instance.web depends on aws_subnet.gone, which is not in the state',
    ]);
    expect(answer.reservations).toEqual({
      write: ['aws_instance.web'],
      read: ['aws_subnet.gone'],
    });
  });

  it('proves a scope whose closure is realized; an undeployed address is written, not feared', () => {
    const answer = expandScope({
      ...base,
      candidates: [addressCandidate('aws_instance.web'), addressCandidate('aws_eip.new')],
      matched: [[{ address: 'aws_instance.web', resourceAddress: 'aws_instance.web' }], []],
      dependencies: [{ address: 'aws_subnet.a', via: 'aws_instance.web' }],
      dependents: [{ address: 'aws_lb.front', via: 'aws_instance.web' }],
      realized: new Set(['aws_subnet.a']),
    });
    expect(answer.provably_safe).toBe(true);
    expect(answer.unresolved).toEqual([
      { candidate: 'aws_eip.new', kind: 'address', classification: 'undeployed' },
    ]);
    expect(answer.reservations).toEqual({
      write: ['aws_eip.new', 'aws_instance.web'],
      read: ['aws_lb.front', 'aws_subnet.a'],
    });
  });

  it('names nothing: nothing to prove', () => {
    const answer = expandScope({ ...base, candidates: [], matched: [] });
    expect(answer.provably_safe).toBe(false);
    expect(answer.reasons).toEqual(['the candidates name nothing to plan']);
  });
});
