import { StateHarness } from '../../../test/support/state-harness';
import {
  appliedToEmptyCopies,
  handledEvents,
  recordingStatements,
  shadowRows,
  tableRows,
} from '../../../test/support/projector-batches';
import type { RecordedEvent } from '../../domain/shared/event';
import { parseStateDocument, StateDocumentV4 } from '../../domain/terraform';
import { createShadowTables, dropShadowTables, useShadowTables } from '../shadow-tables';
import type { Projector } from '../projector';
import { ResourceLifecyclesProjector } from './resource-lifecycles.projector';

const INSTANCES = 700; // more than the projector's COPY threshold (100 opens)
const ODD = ['tab\there', 'line\nbreak\r\n', 'back\\slash \\N \\.', 'nul\u0000', '"q" \u{1F600}'];

/**
 * A big first commit whose instances carry what COPY's text format and
 * jsonb make special: separators, backslashes, NUL (U+FFFD in the
 * queryable columns, exact in `instance`), big numbers, string keys,
 * deposed objects, private data, unknown members.
 */
function bigDocument(serial: number): StateDocumentV4 {
  const text = JSON.stringify({
    version: 4,
    terraform_version: '1.11.4',
    serial,
    lineage: 'copy-lineage',
    outputs: { endpoint: { value: `v${serial}`, type: 'string' } },
    resources: [
      {
        mode: 'managed',
        type: 'terraform_data',
        name: 'base',
        provider: 'provider["terraform.io/builtin/terraform"]',
        instances: [{ schema_version: 0, attributes: { id: 'base' }, sensitive_attributes: [] }],
      },
      {
        module: 'module.herd["a\\tb"]',
        mode: 'managed',
        type: 'terraform_data',
        name: 'many',
        each: 'map',
        provider: 'provider["terraform.io/builtin/terraform"]',
        instances: Array.from({ length: INSTANCES }, (_, i) => ({
          index_key: `k${i} ${ODD[i % ODD.length]}`,
          ...(i % 50 === 7 ? { deposed: `dep${i}` } : {}),
          ...(i % 3 === 0 ? { status: 'tainted' } : {}),
          schema_version: i % 2,
          attributes: {
            id: `id-${i}`,
            input: { value: ODD[(i + 1) % ODD.length], type: 'string' },
            big: 'BIG',
          },
          sensitive_attributes: i % 4 === 0 ? [[{ type: 'get_attr', value: 'input' }]] : [],
          ...(i % 5 === 0 ? { private: `cHJpdmF0ZQ==${i}` } : {}),
          ...(i % 6 === 0 ? { create_before_destroy: true } : {}),
          ...(i % 9 === 0 ? { identity_schema_version: 0, identity: { id: ODD[i % 5] } } : {}),
          // an unknown member whose key JSON must escape
          ...(i % 11 === 0 ? { 'x "quoted" \\ key\u00e9': ODD[i % 5] } : {}),
          dependencies: ['terraform_data.base'],
        })),
      },
    ],
    check_results: null,
  }).replace(/"BIG"/g, '123456789012345678901234567890.5');
  return parseStateDocument(text);
}

describe('resource lifecycles: the COPY path writes what the row-by-row path writes', () => {
  let h: StateHarness;
  let events: RecordedEvent[];
  // The lifecycles (`resources`, `outputs`); their edges are the view
  // resource_dependencies over `resources`.
  const projector: Projector = new ResourceLifecyclesProjector();

  beforeAll(async () => {
    h = await StateHarness.create();
    await h.commit('big', bigDocument(1));
    const next = bigDocument(2);
    // A second version: closes and a few opens (under the COPY threshold).
    next.resources[1].instances.splice(10, 3);
    await h.commit('big', next);
    events = await handledEvents(h, projector);
  });
  afterAll(async () => {
    await dropShadowTables(h.db);
    await h.close();
  });

  const applied = (apply: (tx: Parameters<typeof projector.apply>[1]) => Promise<void>) =>
    appliedToEmptyCopies(h.db, projector, apply);

  it('a first commit of 700 instances projects to the same rows in one batch as one event at a time', async () => {
    const opens = events.filter((e) => e.type === 'LifecycleOpened').length;
    expect(opens).toBe(INSTANCES + 1);
    const oneByOne = await applied(async (tx) => {
      for (const e of events) await projector.apply([e], tx);
    });
    const statements: string[] = [];
    const inOneBatch = await applied((tx) => {
      const seen = recordingStatements(tx, statements);
      return projector.apply(events, seen);
    });
    // One COPY, the batch's first statement (the commit's outputs after it),
    // its savepoint taken in the same query: PostgreSQL's longest work for a
    // first commit starts at once.
    expect(statements.filter((q) => /\bCOPY\b/.test(q))).toHaveLength(1);
    expect(statements[0]).toMatch(/^SAVEPOINT kl_open_copy; COPY resources /);
    expect(statements.some((q) => q.startsWith('INSERT INTO outputs'))).toBe(true);
    expect(inOneBatch).toEqual(oneByOne);
    expect(projector.tables).toEqual(['resources', 'outputs']);
    expect(oneByOne[0]).toHaveLength(opens); // resources
    // …and the live projection (the runner's batches) holds the same rows,
    // with one edge per instance of `many` (each names `base`) in the view.
    expect(await tableRows(h.db, projector.tables)).toEqual(oneByOne);
    const edges = await h.db.query<{ to_address: string; n: number }>(
      `SELECT to_address, count(DISTINCT from_address)::int AS n FROM resource_dependencies
        WHERE create_version = 1 GROUP BY 1`,
    );
    expect(edges).toEqual([{ to_address: 'terraform_data.base', n: INSTANCES }]);
    // The exact text survives in `instance`; the queryable columns hold U+FFFD for NUL.
    const [row] = await h.db.query<{ instance: string; value: string }>(
      `SELECT instance::text AS instance, attributes->'input'->>'value' AS value FROM resources
        WHERE attributes->>'id' = 'id-2' AND delete_version IS NULL`,
    );
    expect(row.value).toBe('nul\ufffd');
    expect(row.instance).toContain('"value":"nul\\u0000"');
    expect(row.instance).toContain('123456789012345678901234567890.5');
  });

  it('a batch redelivered over rows it already wrote changes nothing and does not fail', async () => {
    const once = await applied((tx) => projector.apply(events, tx));
    const twice = await applied(async (tx) => {
      // Part applied before (the statements), then the whole batch again (COPY meets them).
      for (const e of events.slice(0, 20)) await projector.apply([e], tx);
      await projector.apply(events, tx);
      await projector.apply(events, tx);
    });
    expect(twice).toEqual(once);
  });

  it('a batch that fails after its COPY leaves nothing behind', async () => {
    await dropShadowTables(h.db);
    const live = await createShadowTables(h.db, projector.tables);
    await expect(
      h.db.transaction(async (tx) => {
        await useShadowTables(tx, live);
        await projector.apply(events, tx);
        throw new Error('the checkpoint moved under us');
      }),
    ).rejects.toThrow(/moved under us/);
    const left = await shadowRows(h.db, projector);
    expect(left.flat()).toEqual([]);
  });
});
