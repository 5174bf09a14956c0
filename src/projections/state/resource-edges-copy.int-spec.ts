import { StateHarness } from '../../../test/support/state-harness';
import {
  appliedToEmptyCopies,
  handledEvents,
  recordingStatements,
  tableRows,
} from '../../../test/support/projector-batches';
import type { RecordedEvent } from '../../domain/shared/event';
import { parseStateDocument, StateDocumentV4 } from '../../domain/terraform';
import { dropShadowTables } from '../shadow-tables';
import { ResourceEdgesProjector } from './resource-edges.projector';

const INSTANCES = 700; // more than the projector's COPY threshold (500 sources)
// What COPY's text format and a text[] literal make special.
const ODD = ['q"uote', 'back\\slash \\N', 'tab\tnl\n', '{br,ace}', 'sp ace', 'emo\u{1F600}'];

/** A first commit whose instances name resources with those characters in their keys. */
function document(serial: number, drop = 0): StateDocumentV4 {
  const target = (i: number) => `module.m["${ODD[i % ODD.length]}"].terraform_data.t${i % 3}`;
  return parseStateDocument(
    JSON.stringify({
      version: 4,
      terraform_version: '1.11.4',
      serial,
      lineage: 'edges-copy',
      outputs: {},
      resources: [
        {
          module: 'module.herd["a\tb"]',
          mode: 'managed',
          type: 'terraform_data',
          name: 'many',
          each: 'map',
          provider: 'provider["terraform.io/builtin/terraform"]',
          instances: Array.from({ length: INSTANCES - drop }, (_, i) => ({
            index_key: `k${i} ${ODD[i % ODD.length]}`,
            schema_version: 0,
            attributes: { id: `id-${i}` },
            sensitive_attributes: [],
            // Sorted and repeated names too: the projector keeps each once, sorted.
            dependencies: [target(i), 'terraform_data.base', target(i + 1), target(i)],
          })),
        },
      ],
      check_results: null,
    }),
  );
}

describe('resource edges: the COPY of new sources writes what the statements write', () => {
  let h: StateHarness;
  let events: RecordedEvent[];
  const projector = new ResourceEdgesProjector();

  beforeAll(async () => {
    h = await StateHarness.create();
    await h.commit('edges', document(1));
    await h.commit('edges', document(2, 40)); // closes the last 40 instances
    events = await handledEvents(h, projector);
  });
  afterAll(async () => {
    await dropShadowTables(h.db);
    await h.close();
  });

  const applied = (apply: (tx: Parameters<typeof projector.apply>[1]) => Promise<void>) =>
    appliedToEmptyCopies(h.db, projector, apply);

  it('a first commit and a second version in one batch project like one event at a time', async () => {
    expect(events.filter((e) => e.type === 'LifecycleClosed')).toHaveLength(40);
    const oneByOne = await applied(async (tx) => {
      for (const e of events) await projector.apply([e], tx);
    });
    const statements: string[] = [];
    const inOneBatch = await applied((tx) =>
      projector.apply(events, recordingStatements(tx, statements)),
    );
    expect(statements.filter((q) => q.startsWith('COPY resource_edge_sources'))).toHaveLength(1);
    expect(inOneBatch).toEqual(oneByOne);
    expect(oneByOne[1]).toHaveLength(INSTANCES); // a source per address, 40 of them closed
    expect(oneByOne[1].filter((r) => r.endsWith(',)'))).toHaveLength(40);
    // The live projection (a first commit, then a delta) holds the same rows.
    expect(await tableRows(h.db, projector.tables)).toEqual(oneByOne);
    const [odd] = await h.db.query<{ dependencies: string[] }>(
      `SELECT dependencies FROM resource_edge_sources WHERE address LIKE '%k5 emo%'`,
    );
    expect(odd.dependencies).toEqual([
      'module.m["emo\u{1F600}"].terraform_data.t2',
      'module.m["q"uote"].terraform_data.t0',
      'terraform_data.base',
    ]);
  });

  it('the second batch of a first commit (sources already there) takes the statements', async () => {
    const statements: string[] = [];
    const opens = events.filter((e) => e.type === 'LifecycleOpened');
    const inTwo = await applied(async (tx) => {
      const seen = recordingStatements(tx, statements);
      await projector.apply(opens.slice(0, 600), seen);
      await projector.apply(opens.slice(590), seen); // ten redelivered
    });
    expect(statements.filter((q) => q.startsWith('COPY '))).toHaveLength(1);
    const oneByOne = await applied(async (tx) => {
      for (const e of opens) await projector.apply([e], tx);
    });
    expect(inTwo).toEqual(oneByOne);
  });
});
