import { wholeLog } from '../support/whole-log';
import { LOG_START } from '../../src/domain/shared/event';
import { DeltaUpsert } from '../../src/domain/state';
import {
  buildDocument,
  documentMeta,
  flattenInstances,
  InstanceObjectV4,
  parseStateDocument,
  StateDocumentV4,
} from '../../src/domain/terraform';
import { stateDocumentText } from '../../src/domain/terraform';
import { ApplyHarness } from '../support/apply-harness';
import { snapshotTables, StateHarness, testDocument } from '../support/state-harness';

const WEB = 'module.web.terraform_data.a';

function base(serial = 1): StateDocumentV4 {
  return testDocument(
    serial,
    [
      { name: 'vpc', input: 'v' },
      { module: 'module.web', name: 'a', key: 0, input: 'w0' },
      { module: 'module.web', name: 'a', key: 1, input: 'w1' },
      { module: 'module.db', name: 'main', input: 'd' },
    ],
    { vpc: { value: 'vpc-1', type: 'string' } },
  );
}

/** An instance object as terraform writes one: its own member and attribute order. */
function written(key: number, input: string): InstanceObjectV4 {
  return {
    index_key: key,
    schema_version: 0,
    attributes: { zeta: input, id: `id-${input}`, alpha: [3, 1, 2] },
    sensitive_attributes: [],
    identity_schema_version: 0,
  };
}

function upsertOf(doc: StateDocumentV4, address: string, instance: InstanceObjectV4): DeltaUpsert {
  const found = flattenInstances(doc).find((i) => i.address === address);
  if (!found) throw new Error(address);
  return { address, resource: found.resource, instance };
}

describe('apply runs through the read models', () => {
  let h: StateHarness;
  let a: ApplyHarness;
  beforeAll(async () => {
    h = await StateHarness.create();
    a = new ApplyHarness(h);
  });
  afterAll(async () => {
    await h.close();
  });

  const rows = (sql: string, params: unknown[] = []) =>
    h.db.query<Record<string, unknown>>(sql, params);

  it('shows a run and its reservations while it runs, and what it committed after', async () => {
    await h.commit('prod', base(5));
    const run = await a.start('prod', {
      reservations: [
        { glob: 'module.web', mode: 'write' },
        { glob: 'terraform_data.vpc', mode: 'read' },
      ],
      writeSet: [`${WEB}[1]`],
      readSet: ['terraform_data.vpc'],
      info: { host: 'laptop' },
    });
    expect(run.reservations.map((r) => [r.glob, r.mode])).toEqual([
      ['module.web.*', 'write'],
      ['terraform_data.vpc', 'read'],
    ]);
    const held = await a.readModel.reservations(h.clockPort.now(), 'prod');
    expect(held.reservations).toEqual([
      expect.objectContaining({
        state: 'prod',
        kind: 'apply',
        run_id: run.runId,
        glob: 'module.web.*',
        mode: 'write',
        actor: 'alice',
        info: null,
        expires_at: run.expiresAt,
      }),
      expect.objectContaining({ glob: 'terraform_data.vpc', mode: 'read' }),
    ]);
    expect(held.runs).toEqual([{ run_id: run.runId, state: 'prod', info: { host: 'laptop' } }]);
    expect(await a.readModel.run(run.runId)).toMatchObject({
      state: 'prod',
      status: 'running',
      lane: 'full',
      base_version: 1,
      write_set: [`${WEB}[1]`],
      read_set: ['terraform_data.vpc'],
      finished_at: null,
      output_state: null,
    });

    const renewed = await a.heartbeat('prod', run.runId, 600);
    expect(Date.parse(renewed.expiresAt)).toBeGreaterThan(Date.parse(run.expiresAt) - 300_000);
    expect(
      (await a.readModel.reservations(h.clockPort.now(), 'prod')).reservations[0].expires_at,
    ).toBe(renewed.expiresAt);

    const committed = await a.commit(
      'prod',
      run.runId,
      {
        upserts: [upsertOf(base(), `${WEB}[1]`, written(1, 'changed'))],
        outputs: { set: { web: { value: 'w', type: 'string', sensitive: false } }, remove: [] },
        counters: { add: 0, change: 1, destroy: 0 },
      },
      'alice',
    );
    expect(committed).toEqual({ version: 2, serial: 6 });
    expect((await a.readModel.reservations(h.clockPort.now(), 'prod')).reservations).toEqual([]);
    expect(await a.readModel.run(run.runId)).toMatchObject({
      status: 'committed',
      committed_version: 2,
      committed_serial: 6,
      counters: { add: 0, change: 1, destroy: 0 },
      finished_by: 'alice',
    });
    expect(
      await rows(
        `SELECT version, serial, source, actor, run_id FROM state_versions v
           JOIN states s USING (state_id) WHERE s.name = 'prod' ORDER BY version`,
      ),
    ).toEqual([
      { version: 1, serial: '5', source: 'http', actor: 'alice', run_id: null },
      { version: 2, serial: '6', source: 'apply', actor: 'alice', run_id: run.runId },
    ]);
  });

  it('serves exactly the document terraform would write: the instance as sent, the rest as it was', async () => {
    const served = await h.documents.current('prod');
    const expected: StateDocumentV4 = buildDocument(
      {
        ...documentMeta(base(6)),
        outputs: { vpc: { value: 'vpc-1', type: 'string' }, web: { value: 'w', type: 'string' } },
      },
      flattenInstances(base(6)).map((i) =>
        i.address === `${WEB}[1]` ? { ...i, instance: written(1, 'changed') } : i,
      ),
    );
    expect(served!.document).toBe(stateDocumentText(expected));
    // Member order as terraform wrote the instance, not sorted.
    expect(served!.document).toContain('"zeta": "changed",\n');
    expect(served!.document.indexOf('"zeta"')).toBeLessThan(served!.document.indexOf('"alpha"'));
    // The lifecycles moved for the one instance only.
    const lifecycles = await rows(
      `SELECT address, create_version, delete_version FROM resources r
         JOIN states s USING (state_id) WHERE s.name = 'prod'
        ORDER BY address COLLATE "C", create_version`,
    );
    expect(lifecycles).toEqual([
      { address: 'module.db.terraform_data.main', create_version: 1, delete_version: null },
      { address: `${WEB}[0]`, create_version: 1, delete_version: null },
      { address: `${WEB}[1]`, create_version: 1, delete_version: 2 },
      { address: `${WEB}[1]`, create_version: 2, delete_version: null },
      { address: 'terraform_data.vpc', create_version: 1, delete_version: null },
    ]);
  });

  it('lands two disjoint runs on the trunk each left, and refuses stale plans', async () => {
    const web = await a.start('prod', {
      baseVersion: 2,
      reservations: [{ glob: 'module.web.*', mode: 'write' }],
      writeSet: [`${WEB}[0]`],
    });
    const db = await a.start(
      'prod',
      { baseVersion: 2, reservations: [{ glob: 'module.db.*', mode: 'write' }] },
      'bob',
    );
    const trunk = parseStateDocument((await h.documents.current('prod'))!.document);
    await a.commit('prod', db.runId, {
      baseVersion: 2,
      deletes: ['module.db.terraform_data.main'],
      checksum: 'db',
    });
    const webDone = await a.commit('prod', web.runId, {
      baseVersion: 2,
      upserts: [upsertOf(trunk, `${WEB}[0]`, written(0, 'w0-new'))],
      checksum: 'web',
    });
    expect(webDone).toEqual({ version: 4, serial: 8 });
    const doc = parseStateDocument((await h.documents.current('prod'))!.document);
    expect(flattenInstances(doc).map((i) => i.address)).toEqual([
      'terraform_data.vpc',
      `${WEB}[0]`,
      `${WEB}[1]`,
    ]);
    expect(flattenInstances(doc)[1].instance).toEqual(written(0, 'w0-new'));

    // A plan based on version 2 that reads what the db run removed: refused at once.
    await expect(
      a.start('prod', {
        baseVersion: 2,
        reservations: [{ glob: 'module.db.*', mode: 'write' }],
        writeSet: ['module.db.terraform_data.main'],
      }),
    ).rejects.toMatchObject({
      code: 'APPLY.STALE',
      metadata: {
        addresses: [{ address: 'module.db.terraform_data.main', changedInVersion: 3 }],
      },
    });
    expect((await a.readModel.reservations(h.clockPort.now(), 'prod')).reservations).toEqual([]);
    // One that did not say so is refused at its commit, and may then end as a conflict.
    const late = await a.start('prod', {
      baseVersion: 2,
      reservations: [{ glob: 'module.db.*', mode: 'write' }],
    });
    await expect(
      a.commit('prod', late.runId, {
        baseVersion: 2,
        upserts: [
          upsertOf(trunk, 'module.db.terraform_data.main', {
            ...written(0, 'x'),
            index_key: undefined,
          }),
        ],
        checksum: 'late',
      }),
    ).rejects.toMatchObject({ code: 'APPLY.STALE' });
    await a.finish('prod', late.runId, 'conflict', 're-plan needed');
    expect(await a.readModel.run(late.runId)).toMatchObject({
      status: 'conflict',
      error_summary: 're-plan needed',
      committed_version: null,
    });
    expect((await a.readModel.reservations(h.clockPort.now(), 'prod')).reservations).toEqual([]);
  });

  it('keeps the document terraform left when a run fails, and frees its reservations', async () => {
    const run = await a.start('prod', {
      baseVersion: 4,
      reservations: [{ glob: 'terraform_data.vpc', mode: 'write' }],
    });
    const left = { version: 4, serial: 99, resources: [{ big: 1234567 }] };
    await a.finish('prod', run.runId, 'failed', 'Error: boom', left);
    const summary = await a.readModel.run(run.runId);
    expect(summary).toMatchObject({
      status: 'failed',
      error_summary: 'Error: boom',
      output_state: `/v1/api/states/prod/apply-runs/${run.runId}/output-state`,
    });
    expect(JSON.parse((await a.readModel.outputState(run.runId))!)).toEqual(left);
    expect((await a.readModel.reservations(h.clockPort.now(), 'prod')).reservations).toEqual([]);
    // Finishing again the same way is a retry; another ending is refused.
    await a.finish('prod', run.runId, 'failed', 'Error: boom', left);
    await expect(a.finish('prod', run.runId, 'aborted')).rejects.toMatchObject({
      code: 'APPLY.FINISHED',
    });
  });

  it('answers a commit sent again on its finished run only if it is that same commit', async () => {
    const [{ current_version: version }] = await rows(
      `SELECT current_version FROM states WHERE name = 'prod' AND deleted_at IS NULL`,
    );
    const run = await a.start('prod', {
      baseVersion: version as number,
      reservations: [{ glob: 'terraform_data.vpc', mode: 'write' }],
    });
    const change = (id: string) => ({
      baseVersion: version as number,
      upserts: [
        upsertOf(base(), 'terraform_data.vpc', {
          schema_version: 0,
          attributes: { id },
          sensitive_attributes: [],
        }),
      ],
      checksum: `vpc-${id}`,
    });
    const first = await a.commit('prod', run.runId, change('one'));
    // Another change on the finished run (a second client on the same run id) was never
    // stored: it is refused, not answered with the first one's version.
    await expect(a.commit('prod', run.runId, change('two'))).rejects.toMatchObject({
      code: 'APPLY.FINISHED',
    });
    expect(await rows(`SELECT 1 FROM state_versions WHERE checksum = 'vpc-two'`)).toEqual([]);
    // The same commit again is a retry whose answer was lost: answered as before.
    expect(await a.commit('prod', run.runId, change('one'))).toEqual(first);
  });

  it('lets an operator abort a dead run, found by its id alone', async () => {
    const run = await a.start('prod', {
      baseVersion: 4,
      reservations: [{ glob: '*', mode: 'write' }],
    });
    expect(await a.abort(null, run.runId)).toEqual({
      runId: run.runId,
      state: 'prod',
      status: 'aborted',
      released: 1,
    });
    expect(await a.readModel.run(run.runId)).toMatchObject({
      status: 'aborted',
      finished_by: 'operator',
      error_summary: 'aborted by operator',
    });
    expect((await a.readModel.reservations(h.clockPort.now())).reservations).toEqual([]);
    // Aborting again reports how it ended.
    expect(await a.abort('prod', run.runId)).toMatchObject({ status: 'aborted', released: 0 });
  });

  it('shows terraform locks as * reservations, plans shared, and reclaims an expired run', async () => {
    await h.lock('prod', 'P1', 'carol', 'OperationTypePlan');
    await h.lock('prod', 'P2', 'dave', 'OperationTypePlan');
    expect(
      (await a.readModel.reservations(h.clockPort.now(), 'prod')).reservations.map((r) => [
        r.kind,
        r.id,
        r.glob,
        r.mode,
      ]),
    ).toEqual([
      ['terraform-plan', 'P1', '*', 'read'],
      ['terraform-plan', 'P2', '*', 'read'],
    ]);
    expect(
      await rows(`SELECT lock_id, mode FROM state_locks WHERE name = 'prod' ORDER BY lock_id`),
    ).toEqual([
      { lock_id: 'P1', mode: 'read' },
      { lock_id: 'P2', mode: 'read' },
    ]);
    await h.unlock('prod', 'P1');
    await h.unlock('prod', 'P2');

    const run = await a.start('prod', {
      baseVersion: 4,
      leaseSeconds: 60,
      reservations: [{ glob: 'module.web.*', mode: 'write' }],
    });
    h.advance(120);
    // A lease that ran out holds nothing, reclaimed or not.
    expect((await a.readModel.reservations(h.clockPort.now(), 'prod')).reservations).toEqual([]);
    await h.lock('prod', 'W1', 'erin');
    expect(
      (await a.readModel.reservations(h.clockPort.now(), 'prod')).reservations.map((r) => [
        r.kind,
        r.id,
      ]),
    ).toEqual([['terraform-lock', 'W1']]);
    const expired = await rows(
      `SELECT data->>'reclaimedBy' AS by FROM kl_events WHERE type = 'ReservationExpired'`,
    );
    expect(expired).toEqual([{ by: 'W1' }]);
    await expect(a.heartbeat('prod', run.runId)).rejects.toMatchObject({
      code: 'RESERVATION.EXPIRED',
    });
    await h.unlock('prod', 'W1');
  });

  it("changes nothing when the runs' events are applied a second time", async () => {
    const log = await wholeLog(h.events, () => h.events.readAll(LOG_START, 100_000));
    const projector = h.projectors.find((p) => p.tables.includes('apply_runs'))!;
    const before = await snapshotTables(h.db, projector.tables);
    expect(before.apply_runs.length).toBeGreaterThanOrEqual(5);
    const handled = log.filter((e) => projector.handles.includes(e.type));
    await h.db.transaction((tx) => projector.apply(handled, tx));
    await h.db.transaction((tx) => projector.apply(handled.slice(-2), tx));
    expect(await snapshotTables(h.db, projector.tables)).toEqual(before);
  });
});
