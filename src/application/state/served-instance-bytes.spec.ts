import { createHash } from 'node:crypto';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { InstanceObjectV4, instanceObjectText, parseJsonLossless } from '../../domain/terraform';
import { ServedInstanceBytes } from './served-instance-bytes';

function instances(n: number): InstanceObjectV4[] {
  return Array.from({ length: n }, (_, i) => ({
    index_key: i,
    schema_version: 0,
    attributes: { id: `i-${i}`, tags: { Name: `web-${i}` }, size: 3 },
    sensitive_attributes: [],
  }));
}

describe('ServedInstanceBytes', () => {
  it('answers each instance as a served document spells it, with its SHA-256', () => {
    const served = new ServedInstanceBytes();
    // a big number and an escaped text, as the lossless parse reads them
    const [odd] = parseJsonLossless(
      '[{"schema_version":0,"attributes":{"n":123456789012345678901234,"s":"a\\"\\u0000é"}}]',
    ) as unknown as InstanceObjectV4[];
    for (const instance of [...instances(3), odd]) {
      const expected = Buffer.from(instanceObjectText(instance), 'utf8');
      expect(served.encoding.bytes(instance).equals(expected)).toBe(true);
      expect(served.encoding.digest(instance)).toEqual(
        createHash('sha256').update(expected).digest(),
      );
    }
    expect(served.encoding.bytes(odd).toString()).toContain('123456789012345678901234');
  });

  it('warms a commit over turns of the event loop, each instance once', async () => {
    const served = new ServedInstanceBytes();
    const all = instances(20_000);
    served.warm(all);
    // Nothing before the first turn: the caller goes on to its append.
    expect(served.made).toBe(0);
    let turns = 0;
    while (served.made < all.length && turns < 10_000) {
      await nextTurn();
      turns++;
    }
    expect(served.made).toBe(all.length);
    expect(turns).toBeGreaterThan(1);
    // The projector's reads, and a second warming, find them made.
    for (const i of all.slice(0, 100)) served.encoding.bytes(i);
    served.warm(all);
    for (let t = 0; t < turns + 2; t++) await nextTurn();
    expect(served.made).toBe(all.length);
  });

  it('stops where it is told to (a refused commit)', async () => {
    const served = new ServedInstanceBytes();
    served.warm(instances(1_000)).stop();
    for (let t = 0; t < 5; t++) await nextTurn();
    expect(served.made).toBe(0);
  });
});
