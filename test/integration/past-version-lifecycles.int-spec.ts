import { Client } from 'pg';
import type { LogPosition } from '../../src/domain/shared/event';
import { parseStateDocument, type StateDocumentV4 } from '../../src/domain/terraform';
import { LOCK_NAMESPACE, ProjectionTimeoutError } from '../../src/projections/projection-runner';
import { ResourceReadModel } from '../../src/infrastructure/read-models/resource-read-model';
import { versionProjections } from '../../src/projections/state';
import { RESOURCE_LIFECYCLES_PROJECTOR } from '../../src/projections/state/resource-lifecycles.projector';
import { StateHarness, testDocument } from '../support/state-harness';

/**
 * A past version (`?version=`, `?serial=`) read while its commit is being
 * projected: `state_versions` lists it, the lifecycles it is rebuilt from
 * are held back (their projector's batches wait behind an advisory lock
 * another session holds, as in a commit's catch-up on another replica).
 * The read waits for them and serves the version whole, as committed;
 * only a wait that runs out answers 503.
 */
describe('a past version whose lifecycles are still being projected', () => {
  let h: StateHarness;
  let holder: Client;
  const name = 'held';
  const v1 = testDocument(1, [{ name: 'web', input: 'one' }], {}, 'lineage-held');
  /** Changes an instance only: as many instances as version 1. */
  const v2 = testDocument(2, [{ name: 'web', input: 'two' }], {}, 'lineage-held');
  /** Adds one. */
  const v3 = testDocument(
    3,
    [
      { name: 'db', input: 'three' },
      { name: 'web', input: 'two' },
    ],
    {},
    'lineage-held',
  );

  beforeAll(async () => {
    h = await StateHarness.create();
    holder = new Client({ connectionString: h.db.url });
    await holder.connect();
    await h.commit(name, v1);
  });

  afterAll(async () => {
    await holder.end();
    await h.close();
  });

  afterEach(() => jest.restoreAllMocks());

  /** The lifecycles' batches wait from now on, until `release`. */
  const hold = () =>
    holder.query('SELECT pg_advisory_lock($1, hashtext($2))', [
      LOCK_NAMESPACE,
      RESOURCE_LIFECYCLES_PROJECTOR,
    ]);
  const release = () =>
    holder.query('SELECT pg_advisory_unlock($1, hashtext($2))', [
      LOCK_NAMESPACE,
      RESOURCE_LIFECYCLES_PROJECTOR,
    ]);

  /** Commits `doc` with every read model but the lifecycles' (and the edges') caught up. */
  async function commitListedOnly(doc: StateDocumentV4): Promise<void> {
    const position = await h.append(h.commitCommand(name, doc));
    // The projectors fed by StateCreated: the versions' among them, not the lifecycles'.
    await h.runner.waitForPosition(position!, ['StateCreated']);
    const listed = await h.db.query(
      `SELECT 1 FROM state_versions v JOIN states s USING (state_id)
        WHERE s.name = $1 AND v.serial = $2`,
      [name, doc.serial],
    );
    expect(listed).toHaveLength(1);
  }

  /** Resolves once the read model asks to wait for the lifecycles (through the runner). */
  function askedToWait(): Promise<LogPosition> {
    const original = h.runner.waitForPosition.bind(h.runner);
    return new Promise((resolve) => {
      jest.spyOn(h.runner, 'waitForPosition').mockImplementation((position, types, ms) => {
        resolve(position);
        return original(position, types, ms);
      });
    });
  }

  it.each([
    ['changed an instance (as many as before)', 'version', v2],
    ['added an instance', 'serial', v3],
  ] as const)(
    'serves a version that %s once its lifecycles are there, asked by %s',
    async (_what, by, doc) => {
      await hold();
      let read: Promise<string | null>;
      try {
        await commitListedOnly(doc);
        const asked = askedToWait();
        read =
          by === 'version'
            ? h.documents.atVersion(name, doc.serial)
            : h.documents.atSerial(name, doc.serial);
        // Released once the read waits (or, without its wait, once it answered).
        await Promise.race([asked, read.then(noop, noop)]);
      } finally {
        await release();
      }
      const served = await read;
      expect(parseStateDocument(JSON.parse(served!) as unknown)).toEqual(doc);
    },
  );

  it('diffs and reads a resource at such a version (kl diff, kl resource --version) once its lifecycles are there', async () => {
    const resources = new ResourceReadModel(h.db, versionProjections(h.runner));
    const before = testDocument(
      20,
      [
        { name: 'db', input: 'three' },
        { name: 'web', input: 'twenty' },
      ],
      {},
      'lineage-held',
    );
    const after = testDocument(
      21,
      [
        { name: 'db', input: 'three' },
        { name: 'web', input: 'twenty-one' },
      ],
      {},
      'lineage-held',
    );
    await h.commit(name, before);
    await hold();
    let diff: ReturnType<ResourceReadModel['diff']>;
    try {
      await commitListedOnly(after);
      const asked = askedToWait();
      diff = resources.diff(name, { serial: 20 }, null);
      // Released once the diff waits (or, without its wait, once it answered).
      await Promise.race([asked, diff.then(noop, noop)]);
    } finally {
      await release();
    }
    // Read from lifecycles that lacked version 21, it found nothing changed.
    expect(await diff).toMatchObject({
      to: { serial: 21 },
      changed: [expect.objectContaining({ address: 'terraform_data.web' })],
    });
    // The version named by serial, as committed.
    const at = await resources.resource(name, 'terraform_data.web', false, (await diff).to.version);
    expect(at.current?.attributes).toMatchObject({ input: { value: 'twenty-one' } });
  });

  it('answers 503 with the same error when the lifecycles cannot get there in time', async () => {
    const v4 = testDocument(
      4,
      [
        { name: 'db', input: 'three' },
        { name: 'web', input: 'four' },
      ],
      {},
      'lineage-held',
    );
    await hold();
    try {
      await commitListedOnly(v4);
      jest
        .spyOn(h.runner, 'waitForPosition')
        .mockImplementation((position) =>
          Promise.reject(new ProjectionTimeoutError(position, 30_000)),
        );
      await expect(h.documents.version(name, { serial: 4 })).rejects.toMatchObject({
        code: 'SERVER.UNAVAILABLE',
        // The version's own number: the other cases may not have run before.
        message: expect.stringMatching(/^version \d+ is not fully projected yet; retry shortly$/),
      });
    } finally {
      await release();
    }
    jest.restoreAllMocks();
    const served = await h.documents.atSerial(name, 4);
    expect(parseStateDocument(JSON.parse(served!) as unknown)).toEqual(v4);
  });
});

function noop(): void {}
