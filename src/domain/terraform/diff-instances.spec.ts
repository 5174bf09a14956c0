import { fixtureText } from './__fixtures__/fixtures';
import { diffInstances } from './diff-instances';
import { parseStateDocument } from './parse-state-document';
import { StateDocumentV4 } from './state-document';
import { flattenInstances, FlatInstance } from './state-instances';

const hashes = (instances: FlatInstance[]) =>
  new Map(instances.map((i) => [i.address, i.hash] as const));

describe('diffInstances', () => {
  const v1 = flattenInstances(parseStateDocument(fixtureText('modules.v1.tfstate.txt')));
  const v2 = flattenInstances(parseStateDocument(fixtureText('modules.v2.tfstate.txt')));

  it('finds exactly the one instance terraform changed between two applies', () => {
    const delta = diffInstances(hashes(v1), v2);
    expect(delta.closed).toEqual(['terraform_data.changeable']);
    expect(delta.opened.map((i) => i.address)).toEqual(['terraform_data.changeable']);
    expect(delta.opened[0].instance.attributes?.input).toEqual({
      value: 'changeable-v2',
      type: 'string',
    });
    expect(delta.unchanged).toBe(v2.length - 1);
  });

  it('opens everything against an empty state and nothing against itself', () => {
    expect(diffInstances(new Map(), v1)).toEqual({ opened: v1, closed: [], unchanged: 0 });
    expect(diffInstances(hashes(v1), v1)).toEqual({
      opened: [],
      closed: [],
      unchanged: v1.length,
    });
  });

  it('closes instances that are gone', () => {
    const delta = diffInstances(hashes(v1), v1.slice(1));
    expect(delta).toEqual({ opened: [], closed: [v1[0].address], unchanged: v1.length - 1 });
  });

  it('does not see key order or formatting', () => {
    const text = fixtureText('modules.v1.tfstate.txt');
    const reordered = JSON.stringify(reverseKeys(JSON.parse(text)));
    const again = flattenInstances(parseStateDocument(reordered));
    expect(diffInstances(hashes(v1), again)).toMatchObject({ opened: [], closed: [] });
  });

  it('reopens an instance whose provider changed, though its attributes did not', () => {
    const doc = parseStateDocument(fixtureText('modules.v1.tfstate.txt'));
    const moved: StateDocumentV4 = {
      ...doc,
      resources: doc.resources.map((r) =>
        r.name === 'single' ? { ...r, provider: 'provider["example.com/other/terraform"]' } : r,
      ),
    };
    const delta = diffInstances(hashes(v1), flattenInstances(moved));
    expect(delta.closed).toEqual(['terraform_data.single']);
    expect(delta.opened.map((i) => i.address)).toEqual(['terraform_data.single']);
  });
});

function reverseKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(reverseKeys);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value)
      .reverse()
      .map(([k, v]) => [k, reverseKeys(v)]),
  );
}
