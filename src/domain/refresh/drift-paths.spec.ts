import { driftPaths } from './drift-paths';

describe('driftPaths: what a provider read changed, spelling aside', () => {
  it('sets aside null against an empty map, list or set, at any depth', () => {
    const applied = { id: 'p', tags: null, rules: [{ cidrs: null, ports: [] }], labels: {} };
    const read = { id: 'p', tags: {}, rules: [{ cidrs: [], ports: null }], labels: null };
    expect(driftPaths(applied, read)).toEqual([]);
  });

  it('sets aside an absent member against a null one (state from an older provider release)', () => {
    expect(driftPaths({ id: 'p' }, { id: 'p', new_attribute: null })).toEqual([]);
    expect(driftPaths({ id: 'p', gone: null }, { id: 'p' })).toEqual([]);
  });

  it('still names a real change next to a normalization, and only the real one', () => {
    const applied = { value: 'v1', tags: null, versioning: [{ enabled: false }] };
    const read = { value: 'v1', tags: {}, versioning: [{ enabled: true }] };
    expect(driftPaths(applied, read)).toEqual(['versioning[0].enabled']);
  });

  it('calls a collection that gained or lost elements drift', () => {
    expect(driftPaths({ tags: null }, { tags: { team: 'net' } })).toEqual(['tags']);
    expect(driftPaths({ tags: { team: 'net' } }, { tags: {} })).toEqual(['tags']);
    expect(driftPaths({ cidrs: ['10.0.0.0/8'] }, { cidrs: [] })).toEqual(['cidrs']);
  });

  it('keeps "" against null as drift: terraform tells them apart', () => {
    expect(driftPaths({ description: null }, { description: '' })).toEqual(['description']);
    expect(driftPaths({ description: '' }, { description: null })).toEqual(['description']);
  });

  it('keeps a present nested block with unset attributes apart from an absent one', () => {
    expect(driftPaths({ timeouts: null }, { timeouts: { create: null } })).toEqual(['timeouts']);
    expect(driftPaths({ timeouts: [] }, { timeouts: [{ create: null }] })).toEqual(['timeouts']);
  });

  it('keeps false, 0 and "0" apart from null and from each other', () => {
    expect(driftPaths({ a: null, b: 0, c: false }, { a: false, b: '0', c: null })).toEqual([
      'a',
      'b',
      'c',
    ]);
  });
});
