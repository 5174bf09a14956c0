import { wholeLog } from '../../../test/support/whole-log';
import { createHash, randomUUID } from 'node:crypto';
import {
  lockInfo,
  snapshotTables,
  StateHarness,
  testDocument,
} from '../../../test/support/state-harness';
import { comparePositions, LOG_START } from '../../domain/shared/event';
import { STATE_EVENT_TYPES } from '../../domain/state';
import { fixtureLines, fixtureText } from '../../domain/terraform/__fixtures__/fixtures';
import { parseStateDocument, StateDocumentV4 } from '../../domain/terraform';
import { stateProjectors } from '.';

const v1 = parseStateDocument(fixtureText('modules.v1.tfstate.txt'));
const v2 = parseStateDocument(fixtureText('modules.v2.tfstate.txt'));

/** v2 with serial 19: `plain` changed, `structured` gone, `added` new, counted[1] without its dependency. */
function v3(): StateDocumentV4 {
  const doc = structuredClone(v2);
  doc.serial = 19;
  doc.outputs = {
    plain: { value: 'changed', type: 'string' },
    secret: doc.outputs.secret,
    added: { value: true, type: 'bool' },
  };
  const counted = doc.resources.find((r) => r.name === 'counted')!;
  delete counted.instances[1].dependencies;
  return doc;
}

const md5 = (text: string) => createHash('md5').update(text, 'utf8').digest('base64');

describe('State read models (projected from the real write path)', () => {
  let h: StateHarness;
  let v1Text: string;
  let oldStateId: string;

  beforeAll(async () => {
    h = await StateHarness.create();
  });
  afterAll(async () => {
    await h.close();
  });

  const q = <R extends Record<string, unknown>>(sql: string, params: unknown[] = []) =>
    h.db.query<R>(sql, params);

  it('shows a lock while it is held, with the LockInfo exactly as sent', async () => {
    await h.lock('prod', 'L1', 'ci-bot');
    expect(
      await q('SELECT name, lock_id, operation, who, info, acquired_by FROM state_locks'),
    ).toEqual([
      {
        name: 'prod',
        lock_id: 'L1',
        operation: 'OperationTypeApply',
        who: 'alice@laptop',
        info: lockInfo('L1'),
        acquired_by: 'ci-bot',
      },
    ]);
    expect(await h.catalog.lock('prod')).toEqual(lockInfo('L1'));
    // Created by the lock, but nothing committed: terraform's GET gets a 404.
    expect(await h.documents.current('prod')).toBeNull();
    const [listed] = await h.catalog.listStates();
    expect(listed).toMatchObject({ name: 'prod', version: 0, serial: null, lock: { id: 'L1' } });
  });

  it('projects a first commit: resources, versions, outputs, dependencies, the document', async () => {
    await h.commit('prod', v1, { lockId: 'L1' });
    await h.unlock('prod', 'L1');
    expect(await q('SELECT * FROM state_locks')).toEqual([]);
    expect(await h.catalog.lock('prod')).toBeNull();

    const current = await q<{ address: string; state_name: string }>(
      'SELECT address, state_name FROM current_resources ORDER BY address',
    );
    expect(current.map((r) => r.address)).toEqual(
      [...fixtureLines('modules.state-list.txt')].sort(),
    );
    expect(new Set(current.map((r) => r.state_name))).toEqual(new Set(['prod']));

    expect(
      await q(
        `SELECT address, resource_address, mode, type, name, module_path, index_key, deposed_key,
                each_mode, create_before_destroy, status, extra, create_version, create_serial
           FROM current_resources
          WHERE address IN ('terraform_data.keyed["10"]', 'terraform_data.counted[1]',
                'module.outer["x"].module.inner[1].terraform_data.deep',
                'data.terraform_remote_state.self')
          ORDER BY address`,
      ),
    ).toEqual([
      expect.objectContaining({
        address: 'data.terraform_remote_state.self',
        resource_address: 'data.terraform_remote_state.self',
        mode: 'data',
        module_path: '',
        index_key: null,
      }),
      {
        address: 'module.outer["x"].module.inner[1].terraform_data.deep',
        resource_address: 'module.outer["x"].module.inner[1].terraform_data.deep',
        mode: 'managed',
        type: 'terraform_data',
        name: 'deep',
        module_path: 'module.outer["x"].module.inner[1]',
        index_key: null,
        deposed_key: null,
        each_mode: null,
        create_before_destroy: false,
        status: null,
        extra: null,
        create_version: 1,
        create_serial: '16',
      },
      expect.objectContaining({
        address: 'terraform_data.counted[1]',
        resource_address: 'terraform_data.counted',
        index_key: '1',
      }),
      // A string key stays quoted, so it cannot be mistaken for count index 10.
      expect.objectContaining({ index_key: '"10"', create_before_destroy: true }),
    ]);

    const [version] = await q('SELECT * FROM state_versions');
    expect(version).toMatchObject({
      version: 1,
      serial: '16',
      lineage: v1.lineage,
      source: 'http',
      actor: 'alice',
      terraform_version: '1.11.4',
      instance_count: 16,
      resource_count: v1.resources.length,
      outputs: v1.outputs,
      check_results: v1.check_results,
      extra: null,
    });

    expect(
      await q(
        'SELECT name, value, sensitive, create_version, delete_version FROM outputs ORDER BY name',
      ),
    ).toEqual([
      {
        name: 'plain',
        value: 'single-value',
        sensitive: false,
        create_version: 1,
        delete_version: null,
      },
      {
        name: 'secret',
        value: 'hunter2',
        sensitive: true,
        create_version: 1,
        delete_version: null,
      },
      {
        name: 'structured',
        value: { list: [1, 2, 3], map: { a: 'b' } },
        sensitive: false,
        create_version: 1,
        delete_version: null,
      },
    ]);

    expect(
      await q(
        `SELECT from_address, to_address, create_version, delete_version FROM resource_dependencies
          ORDER BY from_address`,
      ),
    ).toEqual(
      [0, 1, 2].map((i) => ({
        from_address: `terraform_data.counted[${i}]`,
        to_address: 'terraform_data.single',
        create_version: 1,
        delete_version: null,
      })),
    );

    const served = await h.documents.current('prod');
    expect(served).not.toBeNull();
    expect(served!.stateId).toBe(await h.stateId('prod'));
    expect(parseStateDocument(served!.document)).toEqual(v1);
    expect(served!.md5).toBe(md5(served!.document));
    v1Text = served!.document;
  });

  it('closes and opens exactly the one lifecycle that changed between two terraform applies', async () => {
    await h.commit('prod', v2);
    const rows = await q<{ address: string }>(
      `SELECT address, create_version, delete_version, create_serial, delete_serial FROM resources
        WHERE create_version > 1 OR delete_version IS NOT NULL ORDER BY create_version`,
    );
    expect(rows).toEqual([
      {
        address: 'terraform_data.changeable',
        create_version: 1,
        delete_version: 2,
        create_serial: '16',
        delete_serial: '18',
      },
      {
        address: 'terraform_data.changeable',
        create_version: 2,
        delete_version: null,
        create_serial: '18',
        delete_serial: null,
      },
    ]);
    expect(await q('SELECT count(*)::int AS n FROM current_resources')).toEqual([{ n: 16 }]);
    expect(
      await q<{ value: unknown }>(
        `SELECT attributes -> 'input' -> 'value' AS value FROM current_resources
          WHERE address = 'terraform_data.changeable'`,
      ),
    ).toEqual([{ value: 'changeable-v2' }]);
    // Outputs did not change, so their lifecycles did not either.
    expect(await q('SELECT count(*)::int AS n FROM outputs WHERE create_version = 1')).toEqual([
      { n: 3 },
    ]);
    expect(await q('SELECT count(*)::int AS n FROM outputs')).toEqual([{ n: 3 }]);

    const served = await h.documents.current('prod');
    expect(parseStateDocument(served!.document)).toEqual(v2);
    expect(await h.documents.atSerial('prod', 16)).toBe(v1Text);
    expect(await h.documents.atVersion('prod', 1)).toBe(v1Text);
    expect(await h.documents.atSerial('prod', 18)).toBe(served!.document);
    expect(await h.documents.atSerial('prod', 17)).toBeNull();
  });

  it('gives outputs and dependency edges lifecycles of their own', async () => {
    await h.commit('prod', v3());
    expect(
      await q(
        `SELECT name, value, sensitive, create_version, delete_version, delete_serial
           FROM outputs ORDER BY name, create_version`,
      ),
    ).toEqual([
      {
        name: 'added',
        value: true,
        sensitive: false,
        create_version: 3,
        delete_version: null,
        delete_serial: null,
      },
      {
        name: 'plain',
        value: 'single-value',
        sensitive: false,
        create_version: 1,
        delete_version: 3,
        delete_serial: '19',
      },
      {
        name: 'plain',
        value: 'changed',
        sensitive: false,
        create_version: 3,
        delete_version: null,
        delete_serial: null,
      },
      {
        name: 'secret',
        value: 'hunter2',
        sensitive: true,
        create_version: 1,
        delete_version: null,
        delete_serial: null,
      },
      expect.objectContaining({ name: 'structured', create_version: 1, delete_version: 3 }),
    ]);
    expect(
      await q(
        `SELECT from_address, create_version, delete_version FROM resource_dependencies
          ORDER BY from_address, create_version`,
      ),
    ).toEqual([
      { from_address: 'terraform_data.counted[0]', create_version: 1, delete_version: null },
      // counted[1] lost its dependency: its edge ends with the lifecycle that declared it.
      { from_address: 'terraform_data.counted[1]', create_version: 1, delete_version: 3 },
      { from_address: 'terraform_data.counted[2]', create_version: 1, delete_version: null },
    ]);
    expect(parseStateDocument((await h.documents.current('prod'))!.document)).toEqual(v3());
  });

  it('keeps a commit with a lower serial as a new version, and serves the newest of a serial', async () => {
    await h.commit('prod', v1);
    const served = (await h.documents.current('prod'))!;
    // Same instances, same outputs as version 1: the very same bytes.
    expect(served.document).toBe(v1Text);
    expect(await q('SELECT current_version, current_serial FROM states')).toEqual([
      { current_version: 4, current_serial: '16' },
    ]);
    expect((await h.catalog.history('prod'))!.versions.map((v) => [v.version, v.serial])).toEqual([
      [1, 16],
      [2, 18],
      [3, 19],
      [4, 16],
    ]);
    expect(await h.documents.atSerial('prod', 16)).toBe(v1Text);
    expect(parseStateDocument((await h.documents.atVersion('prod', 3))!)).toEqual(v3());
    expect(parseStateDocument((await h.documents.atSerial('prod', 18))!)).toEqual(v2);
  });

  it('continues on another replica whose cache is cold, from its own raw_state row', async () => {
    const replica = h.newRunner(stateProjectors(h.events));
    await h.commit('prod', v2, {}, replica);
    const served = (await h.documents.current('prod'))!;
    expect(parseStateDocument(served.document)).toEqual(v2);
    expect(await h.documents.atVersion('prod', 5)).toBe(served.document);
    // And the first replica, whose cache is now one version behind, notices.
    await h.commit('prod', v3());
    expect(parseStateDocument((await h.documents.current('prod'))!.document)).toEqual(v3());
    expect(await h.documents.atVersion('prod', 6)).toBe(
      (await h.documents.current('prod'))!.document,
    );
  });

  it('never serves half a commit, even when a batch ends inside it', async () => {
    const position = await h.append(h.commitCommand('split', v1));
    // Readers see the commit once every older transaction has ended (a
    // VACUUM ANALYZE a batch started may still run): wait for that first.
    for (let i = 0; i < 500; i++) {
      if (comparePositions((await h.events.lastPosition())!, position!) >= 0) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    const byName = (name: string) => h.projectors.find((p) => p.name === name)!;
    await h.runner.runBatch(byName('state-catalog'));
    const raw = byName('state-raw');
    // StateCreated, ApplyCommitted and the first of 16 LifecycleOpened.
    expect(await h.runner.runBatch(raw, 3)).toBe(3);
    const served = (await h.documents.current('split'))!;
    expect(served).not.toBeNull();
    expect(parseStateDocument(served.document)).toEqual(v1);
    await h.runner.waitForPosition(position!);
    expect((await h.documents.current('split'))!.document).toBe(served.document);
  });

  it('deletes a state without losing its history, and lets its name be used again', async () => {
    oldStateId = await h.stateId('prod');
    await h.delete('prod');
    expect(await h.documents.current('prod')).toBeNull();
    // The history stays readable under the name, marked deleted.
    const gone = (await h.catalog.history('prod'))!;
    expect(gone.stateId).toBe(oldStateId);
    expect(gone.deletedAt).toEqual(expect.any(String));
    expect(gone.versions).toHaveLength(6);
    expect(await h.catalog.history('never-used')).toBeNull();
    expect(await h.documents.atVersion('prod', 1)).toBeNull();
    expect(
      await q('SELECT count(*)::int AS n FROM current_resources WHERE state_name = $1', ['prod']),
    ).toEqual([{ n: 0 }]);
    expect(await q('SELECT * FROM raw_state WHERE state_id = $1', [oldStateId])).toEqual([]);
    expect(await q('SELECT deleted_at FROM states WHERE state_id = $1', [oldStateId])).toEqual([
      { deleted_at: expect.any(Date) },
    ]);
    expect(
      await q('SELECT count(*)::int AS n FROM state_versions WHERE state_id = $1', [oldStateId]),
    ).toEqual([{ n: 6 }]);

    await h.lock('prod', 'L9');
    const small = testDocument(1, [{ name: 'fresh', input: 'x' }], {}, 'lineage-new');
    await h.commit('prod', small, { lockId: 'L9' });
    const newId = await h.stateId('prod');
    expect(newId).not.toBe(oldStateId);
    expect(await h.catalog.lock('prod')).toEqual(lockInfo('L9'));
    expect(parseStateDocument((await h.documents.current('prod'))!.document)).toEqual(small);
    expect((await h.catalog.history('prod'))!).toMatchObject({ stateId: newId, deletedAt: null });
    expect((await h.catalog.history('prod'))!.versions.map((v) => v.version)).toEqual([1]);
    expect(await h.documents.atSerial('prod', 16)).toBeNull();
    expect(
      await q('SELECT address FROM current_resources WHERE state_name = $1', ['prod']),
    ).toEqual([{ address: 'terraform_data.fresh' }]);
    const names = (await h.catalog.listStates()).map((s) => [s.name, s.stateId]);
    expect(names).toEqual([
      ['prod', newId],
      ['split', await h.stateId('split')],
    ]);
    await h.forceUnlock('prod');
    expect(await h.catalog.lock('prod')).toBeNull();
  });

  it('records on the version the lineage a forced push replaced', async () => {
    await h.commit('pushed', testDocument(1, [{ name: 'a', input: '1' }], {}, 'lineage-a'));
    await h.commit('pushed', testDocument(2, [{ name: 'a', input: '1' }], {}, 'lineage-a'));
    await h.commit('pushed', testDocument(1, [{ name: 'a', input: '2' }], {}, 'lineage-b'));
    expect(
      await q(
        `SELECT version, lineage, lineage_changed_from FROM state_versions
          WHERE state_id = $1 ORDER BY version`,
        [await h.stateId('pushed')],
      ),
    ).toEqual([
      { version: 1, lineage: 'lineage-a', lineage_changed_from: null },
      { version: 2, lineage: 'lineage-a', lineage_changed_from: null },
      { version: 3, lineage: 'lineage-b', lineage_changed_from: 'lineage-a' },
    ]);
    expect((await h.catalog.history('pushed'))!.versions.map((v) => v.lineageChangedFrom)).toEqual([
      null,
      null,
      'lineage-a',
    ]);
  });

  it('lists a name that was never written only while it is locked', async () => {
    const listed = async () => (await h.catalog.listStates()).map((s) => s.name);
    await h.lock('probe', 'P1');
    expect(await listed()).toContain('probe');
    await h.unlock('probe', 'P1');
    expect(await listed()).not.toContain('probe');
    expect(await listed()).toContain('pushed');
  });

  it('changes nothing when a batch is applied a second time', async () => {
    // Reservations too: one run released, one renewed and held, a plan lock held.
    const reserve = (runId: string) =>
      h.run({
        type: 'AcquireReservations',
        data: {
          name: 'pushed',
          runId,
          reservationIds: [`${runId}-0`],
          requests: [{ glob: 'module.a.*', mode: 'read' }],
          leaseSeconds: 600,
          info: {},
          baseVersion: 1,
          writeSet: [],
          readSet: [],
        },
        metadata: h.context('ci'),
      });
    await reserve('run-1');
    await h.run({
      type: 'ReleaseReservations',
      data: { name: 'pushed', runId: 'run-1', reason: 'aborted' },
      metadata: h.context(),
    });
    await reserve('run-2');
    await h.run({
      type: 'RenewReservations',
      data: { name: 'pushed', runId: 'run-2', leaseSeconds: 900 },
      metadata: h.context(),
    });
    await h.lock('pushed', 'kept-plan', 'zed', 'OperationTypePlan');
    const log = await wholeLog(h.events, () => h.events.readAll(LOG_START, 100_000));
    // The State aggregate's read models (apply runs are test/integration/apply-runs').
    const ofState = h.projectors.filter((p) =>
      p.handles.some((t) => STATE_EVENT_TYPES.includes(t)),
    );
    expect(ofState).toHaveLength(5);
    for (const projector of ofState) {
      const before = await snapshotTables(h.db, projector.tables);
      expect(Object.values(before).some((rows) => rows.length > 0)).toBe(true);
      const handled = log.filter((e) => projector.handles.includes(e.type));
      // The whole log as one redelivered batch, and the last commit's events alone.
      await h.db.transaction((tx) => projector.apply(handled, tx));
      await h.db.transaction((tx) => projector.apply(handled.slice(-3), tx));
      expect(await snapshotTables(h.db, projector.tables)).toEqual(before);
    }
  });

  it('projects the outputs of events written before the decider named their changes alike', async () => {
    for (const doc of [v1, v2, v3(), v1]) await h.commit('named', doc);
    // The same history as an older kld wrote it: no outputChanges.
    const legacyId = '00000000-0000-4000-8000-00000000a1de';
    const named = await h.events.readStream('state-named');
    const namedId = (named[0].data as { stateId: string }).stateId;
    const position = (
      await h.events.appendToStream(
        'state-legacy',
        named.map((e) => {
          const { outputChanges: _named, ...data } = e.data as Record<string, unknown>;
          return {
            eventId: randomUUID(),
            type: e.type,
            schemaVersion: e.schemaVersion,
            data: {
              ...data,
              stateId: legacyId,
              ...(e.type === 'StateCreated' ? { name: 'legacy' } : {}),
            },
            metadata: e.metadata,
          };
        }),
        { expectedRevision: 'no_stream' },
      )
    ).position;
    await h.runner.waitForPosition(position);
    const outputs = (stateId: string) =>
      q(
        `SELECT name, value, type, sensitive, create_version, create_serial, delete_version,
                delete_serial FROM outputs WHERE state_id = $1 ORDER BY name, create_version`,
        [stateId],
      );
    const expected = await outputs(namedId);
    expect(expected.map((o) => [o.name, o.create_version, o.delete_version])).toEqual([
      ['added', 3, 4],
      ['plain', 1, 3],
      ['plain', 3, 4],
      ['plain', 4, null],
      ['secret', 1, null],
      ['structured', 1, 3],
      ['structured', 4, null],
    ]);
    expect(await outputs(legacyId)).toEqual(expected);
  });
});
