import type { LogPosition, RecordedEvent } from '../../src/domain/shared/event';
import { parseStateDocument, StateDocumentV4 } from '../../src/domain/terraform';
import { PostgresEventStore } from '../../src/infrastructure/event-store/postgres-event-store';
import { ProjectionRunner } from '../../src/projections/projection-runner';
import type { Projector } from '../../src/projections/projector';
import { applyProjectors } from '../../src/projections/apply';
import { stateProjectors } from '../../src/projections/state';
import { fuzzSeeds, random, withSeed } from '../support/seeded-random';
import {
  READ_MODEL_TABLES,
  snapshotTables,
  StateHarness,
  TestInstance,
  testDocument,
} from '../support/state-harness';
import { quietLogger } from '../support/test-database';

/**
 * The writer's own projectors take its appends from memory (readAppended,
 * heldAppend); every other reader reads them back. Both must build the same
 * read models, and whatever happens in between (a batch that fails after
 * writing its rows, another process applying a commit first) must leave
 * nothing applied twice and nothing skipped.
 */
describe.each(fuzzSeeds([14]))(
  'projectors fed from memory by their own process (seed %i)',
  (seed) => {
    let h: StateHarness;
    beforeAll(async () => {
      h = await StateHarness.create();
    });
    afterAll(async () => {
      await h.close();
    });

    /** A runner of fresh projectors over a store that holds nothing: another process. */
    const readBackRunner = () => {
      const events = new PostgresEventStore(h.db, h.notifier, undefined, 0);
      const runner = new ProjectionRunner({
        events,
        db: h.db,
        notifier: h.notifier,
        logger: quietLogger,
      }).register([...stateProjectors(events), ...applyProjectors()]);
      return { events, runner };
    };

    /** Makes `projector` fail once, after its rows were written: the batch rolls back. */
    const failOnce = (projector: Projector) => {
      const apply = projector.apply.bind(projector);
      let failed = false;
      Object.assign(projector, {
        apply: async (events: RecordedEvent[], tx: Parameters<Projector['apply']>[1]) => {
          await apply(events, tx);
          if (!failed) {
            failed = true;
            throw new Error(`${projector.name}: injected failure after writing`);
          }
        },
      });
      return () => failed;
    };

    it(
      'builds exactly the read models reading back builds, through failures and another process',
      () =>
        withSeed(seed, async () => {
          const fromMemory: number[] = [];
          const readAppended = h.events.readAppended.bind(h.events);
          jest.spyOn(h.events, 'readAppended').mockImplementation(async (from, limit, types) => {
            const events = await readAppended(from, limit, types);
            if (events) fromMemory.push(events.length);
            return events;
          });
          const streamReads = jest.spyOn(h.events, 'readStream');

          const rnd = random(seed);
          const states = new Map<
            string,
            { serial: number; instances: Map<string, TestInstance> }
          >();
          const commit = async (name: string, change: (m: Map<string, TestInstance>) => void) => {
            const model = states.get(name) ?? { serial: 0, instances: new Map() };
            states.set(name, model);
            change(model.instances);
            model.serial += 1;
            const doc = testDocument(model.serial, [...model.instances.values()], {
              count: { value: model.instances.size, type: 'number' },
            });
            await h.commit(name, doc);
            return doc;
          };
          const edit = (m: Map<string, TestInstance>, step: number) => {
            for (let i = 0; i < 1 + Math.floor(rnd() * 6); i++) {
              const keys = [...m.keys()];
              const roll = rnd();
              if (roll < 0.5 && keys.length) {
                const key = keys[Math.floor(rnd() * keys.length)];
                m.set(key, { ...m.get(key)!, input: `edited-${step}-${i}` });
              } else if (roll < 0.75 && keys.length > 1) {
                m.delete(keys[Math.floor(rnd() * keys.length)]);
              } else {
                m.set(`new-${step}-${i}`, {
                  name: 'added',
                  key: `${step}-${i}`,
                  input: `${rnd()}`,
                  dependsOn: ['terraform_data.many'],
                });
              }
            }
          };

          // A first commit big enough for COPY (events, resources, edges).
          await commit('big', (m) => {
            for (let i = 0; i < 1200; i++) {
              m.set(String(i), {
                name: i % 2 ? 'many' : 'other',
                module: i % 3 ? undefined : 'module.net',
                key: i,
                // Now and then what JSON and COPY escape: the rows written from the
                // texts the append remembered must still be exact. (No NUL:
                // snapshotTables reads rows as jsonb, which cannot hold it.)
                input: i % 97 ? `v${i}` : `é😀 back\\slash "q" \\u0000 tab\t ${i}`,
                dependsOn: i % 2 ? ['terraform_data.other'] : undefined,
              });
            }
          });
          for (let step = 0; step < 12; step++) {
            await commit(['big', 'small', 'tiny'][step % 3], (m) => edit(m, step));
          }
          expect(fromMemory.length).toBeGreaterThanOrEqual(13);
          expect(Math.max(...fromMemory)).toBeGreaterThan(500);

          // A batch that fails after writing its rows rolls back; the next one
          // (again from memory) applies the commit once.
          const byName = (name: string) => h.projectors.find((p) => p.name === name)!;
          const failures = ['state-raw', 'state-resource-lifecycles', 'state-resource-edges'].map(
            (name) => failOnce(byName(name)),
          );
          await commit('big', (m) => edit(m, 100));
          await commit('small', (m) => edit(m, 101));
          expect(failures.map((failed) => failed())).toEqual([true, true, true]);

          // Another process (or this one after a crash) applies a commit this
          // process appended: by reading it back. This process then goes on from
          // where that one left the checkpoints.
          const other = readBackRunner();
          const otherReads = jest.spyOn(other.events, 'readAll');
          const position = (await h.append(
            h.commitCommand('big', bump(states.get('big')!, 102)),
          )) as LogPosition;
          await other.runner.waitForPosition(position);
          expect(otherReads).toHaveBeenCalled();
          for (let step = 103; step < 109; step++)
            await commit(['big', 'tiny'][step % 2], (m) => edit(m, step));

          // This process's raw_state projector never read a commit's events back
          // (it reads with a maxCount; the aggregate's loads read without).
          expect(streamReads.mock.calls.filter(([, o]) => o?.maxCount !== undefined)).toEqual([]);
          for (const [name, model] of states) {
            const served = parseStateDocument((await h.documents.current(name))!.document);
            expect(served.serial).toBe(model.serial);
            expect(served.resources.flatMap((r) => r.instances)).toHaveLength(model.instances.size);
          }

          // Rebuilt by reading everything back: the same rows.
          const live = await snapshotTables(h.db);
          for (const table of ['resources', 'resource_edges', 'raw_state_chunks', 'outputs']) {
            expect(live[table].length).toBeGreaterThan(0);
          }
          await readBackRunner().runner.rebuild();
          const rebuilt = await snapshotTables(h.db);
          for (const table of READ_MODEL_TABLES) {
            expect({ table, rows: rebuilt[table] }).toEqual({ table, rows: live[table] });
          }
        }),
      120_000,
    );
  },
);

/** The model's next serial with one instance changed, as a document. */
function bump(
  model: { serial: number; instances: Map<string, TestInstance> },
  step: number,
): StateDocumentV4 {
  const [key, instance] = [...model.instances][0];
  model.instances.set(key, { ...instance, input: `bumped-${step}` });
  model.serial += 1;
  return testDocument(model.serial, [...model.instances.values()], {
    count: { value: model.instances.size, type: 'number' },
  });
}
