import { globCovers, parseAddressGlob } from '../../src/domain/reservations';
import {
  buildDocument,
  documentMeta,
  flattenInstances,
  parseInstanceAddress,
  parseStateDocument,
  StateDocumentV4,
} from '../../src/domain/terraform';
import { ApplyHarness } from '../support/apply-harness';
import {
  READ_MODEL_TABLES,
  snapshotTables,
  StateHarness,
  TestInstance,
  testDocument,
} from '../support/state-harness';
import { fuzzSeeds, seededRandom, withSeed } from '../support/seeded-random';

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
  let a: ApplyHarness;
  // A database per seed: the workload's names and the rebuild cover the whole database.
  beforeEach(async () => {
    h = await StateHarness.create();
    a = new ApplyHarness(h);
  });
  afterEach(async () => {
    await h.close();
  });

  it.each(fuzzSeeds([42]))('yields exactly the rows the live projections wrote (seed %i)', (seed) =>
    withSeed(seed, () => workload(seed)),
  );

  /** A random history of terraform writes, locks, deletes and apply runs, then a rebuild. */
  async function workload(seed: number): Promise<void> {
    const { next: rnd, pick } = seededRandom(seed);
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

    const currentVersion = async (name: string) =>
      (
        await h.db.query<{ current_version: number }>(
          'SELECT current_version FROM states WHERE name = $1 AND deleted_at IS NULL',
          [name],
        )
      )[0].current_version;
    const addressOf = (i: TestInstance) => flattenInstances(testDocument(0, [i]))[0].address;

    /**
     * A kl apply run on part of the state: its reservations, maybe a
     * heartbeat, then a row-level commit of the instances under its glob
     * (changed, removed, added), a failure that keeps terraform's output,
     * or an abort.
     */
    type Ending = 'committed' | 'failed' | 'aborted';
    const endings = new Map<Ending, number>();
    const randomEnding = (): Ending => {
      const roll = rnd();
      return roll < 0.65 ? 'committed' : roll < 0.85 ? 'failed' : 'aborted';
    };
    const applyRun = async (name: string, model: Model, step: number, ending: Ending) => {
      endings.set(ending, (endings.get(ending) ?? 0) + 1);
      const target = pick(['module.net.*', 'module.app["blue"]', 'terraform_data.web']);
      const run = await a.start(
        name,
        {
          baseVersion: await currentVersion(name),
          reservations: [
            { glob: target, mode: 'write' },
            ...(rnd() < 0.5 ? [{ glob: 'terraform_data.cache', mode: 'read' as const }] : []),
          ],
          writeSet: [target],
          // on the run's first reservation only, shown on each of its rows
          info: { step, preview: [`~ ${target}`] },
        },
        pick(['alice', 'bob', 'ci']),
      );
      if (rnd() < 0.3) await a.heartbeat(name, run.runId);
      if (ending === 'committed') {
        const glob = parseAddressGlob(target);
        const covered = [...model.instances].filter(([, i]) =>
          globCovers(glob, parseInstanceAddress(addressOf(i))),
        );
        const next = new Map(model.instances);
        const touched = new Set<string>();
        for (const [id, i] of covered) {
          const r = rnd();
          if (r < 0.4) {
            next.set(id, { ...i, input: `${i.input}*` });
            touched.add(id);
          } else if (r < 0.6) next.delete(id);
        }
        if (target !== 'terraform_data.web') {
          const added = newInstance();
          added.module = target === 'module.net.*' ? 'module.net' : 'module.app["blue"]';
          next.set(idOf(added), added);
          touched.add(idOf(added));
        }
        // Removed unless the added instance took its address back: a delta that both writes and
        // deletes one address is invalid (APPLY.INVALID), and a plan never makes one.
        const deletes = covered.filter(([id]) => !next.has(id)).map(([, i]) => addressOf(i));
        const outputs =
          rnd() < 0.4
            ? { ...model.outputs, endpoint: { value: `apply-${step}`, type: 'string' } }
            : model.outputs;
        const serial = model.last!.serial + 1;
        const doc = testDocument(serial, [...next.values()], outputs);
        const upserts = flattenInstances(doc)
          .filter((f) => [...touched].some((id) => addressOf(next.get(id)!) === f.address))
          .map((f) => ({ address: f.address, resource: f.resource, instance: f.instance }));
        await a.commit(name, run.runId, {
          baseVersion: await currentVersion(name),
          upserts,
          deletes,
          outputs: {
            set: outputs === model.outputs ? {} : { endpoint: outputs.endpoint },
            remove: [],
          },
          counters: { add: 0, change: touched.size, destroy: deletes.length },
          checksum: `delta-${step}`,
        });
        model.instances = next;
        model.outputs = outputs;
        model.last = doc;
        model.serial = Math.max(model.serial, serial);
      } else if (ending === 'failed') {
        await a.finish(name, run.runId, 'failed', `step ${step} failed`, {
          version: 4,
          serial: 1234567,
          resources: [],
        });
      } else {
        await a.abort(rnd() < 0.5 ? name : null, run.runId);
      }
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
      } else if (roll < 0.6 && model.last) {
        await applyRun(name, model, step, randomEnding());
      } else if (roll < 0.65 && model.last) {
        // Plans read side by side, and end.
        await h.lock(name, `plan-${step}-a`, 'carol', 'OperationTypePlan');
        await h.lock(name, `plan-${step}-b`, 'dave', 'OperationTypePlan');
        await h.unlock(name, `plan-${step}-a`);
        await h.forceUnlock(name);
      } else {
        mutate(model);
        model.serial += 1;
        await commit(name, model, model.serial);
      }
    }
    // Whatever the seed drew, the history holds for certain: a state left locked; every ending
    // of a run, three delta commits among them; a run still holding on; plans left holding;
    // two states deleted, one name reused; a dependency and an output.
    await h.lock('gamma', 'held', 'bob');
    const alpha = models.get('alpha') ?? fresh();
    models.set('alpha', alpha);
    if (!alpha.last) {
      alpha.serial += 1;
      await commit('alpha', alpha, alpha.serial);
    }
    let step = 1000;
    for (const ending of ['committed', 'failed', 'aborted'] as const) {
      const least = ending === 'committed' ? 3 : 1;
      while ((endings.get(ending) ?? 0) < least) await applyRun('alpha', alpha, step++, ending);
    }
    // The one invalid delta the workload sends, on purpose: an address both written and deleted
    // is refused and changes nothing; its run is then aborted.
    const twice = await a.start('alpha', {
      baseVersion: await currentVersion('alpha'),
      reservations: [{ glob: 'module.net.*', mode: 'write' }],
      writeSet: ['module.net.*'],
    });
    const version = await currentVersion('alpha');
    const [named] = flattenInstances(
      testDocument(0, [{ module: 'module.net', name: 'twice', input: 'x' }]),
    );
    await expect(
      a.commit('alpha', twice.runId, {
        baseVersion: version,
        upserts: [{ address: named.address, resource: named.resource, instance: named.instance }],
        deletes: [named.address],
        outputs: { set: {}, remove: [] },
        counters: { add: 1, change: 0, destroy: 1 },
        checksum: 'twice',
      }),
    ).rejects.toMatchObject({ code: 'APPLY.INVALID' });
    expect(await currentVersion('alpha')).toBe(version);
    await a.abort('alpha', twice.runId);
    await a.start('alpha', {
      baseVersion: await currentVersion('alpha'),
      reservations: [
        { glob: 'module.net.*', mode: 'write' },
        { glob: 'terraform_data.web', mode: 'read' },
      ],
      info: { held: 'to the end' },
    });
    const delta = models.get('delta') ?? fresh();
    models.set('delta', delta);
    if (!delta.last) {
      delta.serial += 1;
      await commit('delta', delta, delta.serial);
    }
    await h.lock('delta', 'plan-left-1', 'erin', 'OperationTypePlan');
    await h.lock('delta', 'plan-left-2', 'frank', 'OperationTypePlan');
    for (const gone of ['beta', 'epsilon']) {
      await commit(gone, models.get(gone) ?? fresh(), 1000);
      await h.delete(gone);
      models.set(gone, fresh());
    }
    const reused = models.get('beta')!;
    reused.instances.set('x', { name: 'reborn', input: 'again' });
    reused.instances.set('y', {
      name: 'follower',
      input: 'after',
      dependsOn: ['terraform_data.reborn'],
    });
    reused.outputs = { endpoint: { value: 'reborn', type: 'string' } };
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
    // The workload did what it is meant to: every ending of a run, and delta commits.
    const statuses = await h.db.query<{ status: string }>(
      'SELECT DISTINCT status FROM apply_runs ORDER BY 1',
    );
    expect(statuses.map((r) => r.status)).toEqual(['aborted', 'committed', 'failed', 'running']);
    const deltas = await h.db.query("SELECT 1 FROM state_versions WHERE source = 'apply'");
    expect(deltas.length).toBeGreaterThanOrEqual(3);

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
  }
});
