import {
  buildDocument,
  documentMeta,
  flattenInstances,
  parseStateDocument,
  StateDocumentV4,
} from '../../src/domain/terraform';
import {
  READ_MODEL_TABLES,
  snapshotTables,
  StateHarness,
  TestInstance,
  testDocument,
} from '../support/state-harness';

/** A small deterministic generator (mulberry32), so a failure replays the same workload. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Model {
  serial: number;
  instances: Map<string, TestInstance>;
  outputs: StateDocumentV4['outputs'];
  last: StateDocumentV4 | null;
}

/** The same document in terraform's resource and instance order, as the backend serves it. */
const inWriterOrder = (doc: StateDocumentV4 | null) =>
  doc && buildDocument(documentMeta(doc), flattenInstances(doc));

const idOf = (i: TestInstance) => JSON.stringify([i.module ?? '', i.name, i.key ?? null]);

describe('rebuilding the read models from the log', () => {
  let h: StateHarness;
  beforeAll(async () => {
    h = await StateHarness.create();
  });
  afterAll(async () => {
    await h.close();
  });

  it('yields exactly the rows the live projections wrote', async () => {
    const rnd = random(42);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(rnd() * items.length)];
    const models = new Map<string, Model>();
    const fresh = (): Model => ({ serial: 0, instances: new Map(), outputs: {}, last: null });
    let counter = 0;

    // Like terraform: a resource has either no key, count (numbers) or for_each (strings).
    const newInstance = (): TestInstance => {
      counter += 1;
      const name = pick(['web', 'db', 'queue', 'cache']);
      return {
        name,
        module: counter % 3 === 1 ? pick(['module.net', 'module.app["blue"]']) : undefined,
        key: name === 'db' ? counter % 5 : name === 'queue' ? `k${counter % 7}` : undefined,
        input: `v${counter}`,
      };
    };

    const commit = async (name: string, model: Model, serial: number, lockId?: string) => {
      const doc = testDocument(serial, [...model.instances.values()], model.outputs);
      await h.commit(name, doc, { lockId, actor: pick(['alice', 'bob', 'ci']) });
      model.last = doc;
    };

    const mutate = (model: Model) => {
      const ids = [...model.instances.keys()];
      for (let n = Math.floor(rnd() * 3); n > 0 && ids.length; n--) {
        const id = pick(ids);
        const i = model.instances.get(id)!;
        model.instances.set(id, { ...i, input: `${i.input}'` });
      }
      for (let n = Math.floor(rnd() * 3); n > 0 && ids.length > 2; n--) {
        model.instances.delete(pick(ids));
      }
      for (let n = Math.floor(rnd() * 3); n > 0; n--) {
        const added = newInstance();
        const targets = [...model.instances.values()].filter((t) => t.key === undefined);
        if (targets.length && rnd() < 0.5) {
          const t = pick(targets);
          added.dependsOn = [`${t.module ? `${t.module}.` : ''}terraform_data.${t.name}`];
        }
        model.instances.set(idOf(added), added);
      }
      if (rnd() < 0.4) {
        model.outputs = {
          ...model.outputs,
          [pick(['endpoint', 'password', 'count'])]: {
            value: `out-${counter}`,
            type: 'string',
            ...(rnd() < 0.5 ? { sensitive: true } : {}),
          },
        };
      }
      if (rnd() < 0.1) model.outputs = {};
    };

    for (let step = 0; step < 60; step++) {
      const name = pick(['alpha', 'beta', 'gamma', 'delta']);
      const model = models.get(name) ?? fresh();
      models.set(name, model);
      const roll = rnd();
      if (roll < 0.15 && model.last) {
        // Lower serial: an old terraform run writing late.
        await commit(name, model, Math.max(0, model.serial - 3));
      } else if (roll < 0.35) {
        const lockId = `lock-${step}`;
        await h.lock(name, lockId, 'ci');
        mutate(model);
        model.serial += 1;
        await commit(name, model, model.serial, lockId);
        if (rnd() < 0.5) await h.unlock(name, lockId);
        else await h.forceUnlock(name);
      } else if (roll < 0.42 && model.last) {
        await h.delete(name);
        models.set(name, fresh()); // the next use of the name starts a new state
      } else {
        mutate(model);
        model.serial += 1;
        await commit(name, model, model.serial);
      }
    }
    // A state left locked, one deleted and one reused for certain.
    await h.lock('gamma', 'held', 'bob');
    await commit('beta', models.get('beta')!, 1000);
    await h.delete('beta');
    const reused = fresh();
    reused.instances.set('x', { name: 'reborn', input: 'again' });
    models.set('beta', reused);
    await commit('beta', reused, 1);

    // Bigger than one live batch (500) and one rebuild batch (5000) of events.
    const big = fresh();
    for (let k = 0; k < 5200; k++)
      big.instances.set(`${k}`, { name: 'many', key: k, input: `${k}` });
    models.set('big', big);
    await commit('big', big, 1);
    big.instances.set('17', { name: 'many', key: 17, input: 'changed' });
    await commit('big', big, 2);

    for (const [name, model] of models) {
      const served = await h.documents.current(name);
      if (model.last === null) continue;
      expect(parseStateDocument(served!.document)).toEqual(inWriterOrder(model.last));
    }

    const live = await snapshotTables(h.db);
    for (const table of READ_MODEL_TABLES) expect(live[table].length).toBeGreaterThan(0);
    const deleted = await h.db.query('SELECT 1 FROM states WHERE deleted_at IS NOT NULL');
    expect(deleted.length).toBeGreaterThanOrEqual(2);

    const report = await h.runner.rebuild();
    expect(report.map((r) => r.events).every((n) => n > 5200)).toBe(true);
    const rebuilt = await snapshotTables(h.db);
    for (const table of READ_MODEL_TABLES) {
      expect({ table, rows: rebuilt[table] }).toEqual({ table, rows: live[table] });
    }

    // The live projectors go on from the rebuilt rows (their caches are now stale).
    big.instances.set('18', { name: 'many', key: 18, input: 'after-rebuild' });
    await commit('big', big, 3);
    expect(parseStateDocument((await h.documents.current('big'))!.document)).toEqual(
      inWriterOrder(big.last),
    );
  });
});
