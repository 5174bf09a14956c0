import { wholeLog } from '../../../test/support/whole-log';
import { snapshotTables, StateHarness, testDocument } from '../../../test/support/state-harness';
import { DeciderService } from '../../application/decider.service';
import { PROVIDER_CONFIGS, REFRESH_RUN } from '../../application/refresh/refresh-aggregates';
import { RefreshResult } from '../../domain/refresh';
import { LOG_START } from '../../domain/shared/event';
import { StateCommand, stateStreamId } from '../../domain/state';
import { StateDocumentV4 } from '../../domain/terraform';
import { PostgresSnapshotStore } from '../../infrastructure/event-store/postgres-snapshot-store';
import { ProjectionRunner } from '../projection-runner';
import { stateProjectors } from '../state';
import { refreshProjectors } from '.';

const REFRESH_TABLES = ['refresh_runs', 'refresh_results', 'provider_configs'] as const;
const AWS = 'registry.terraform.io/hashicorp/aws';

/** Three instances of one resource; `inputs` are their `input.value`s. */
const docOf = (serial: number, inputs: [string, string, string]): StateDocumentV4 =>
  testDocument(
    serial,
    inputs.map((input, key) => ({ name: 'web', key, input })),
  );

const result = (
  address: string,
  outcome: RefreshResult['outcome'],
  changedPaths: string[] = [],
): RefreshResult => ({
  address,
  provider: 'provider["terraform.io/builtin/terraform"]',
  outcome,
  beforeHash: `before-${address}`,
  afterHash: outcome === 'unchanged' ? `before-${address}` : `after-${address}`,
  changedPaths,
});

describe('Refresh read models (projected from the real write path)', () => {
  let h: StateHarness;
  let runner: ProjectionRunner;
  let deciders: DeciderService;
  let stateId: string;
  let runId: string;
  let ids = 0;

  beforeAll(async () => {
    h = await StateHarness.create();
    runner = h.newRunner([...stateProjectors(h.events), ...refreshProjectors()]);
    let clock = Date.parse('2026-06-01T00:00:00.000Z');
    deciders = new DeciderService({
      events: h.events,
      snapshots: new PostgresSnapshotStore(h.db),
      sync: runner,
      clock: { now: () => new Date((clock += 1000)) },
      ids: { uuid: () => `00000000-0000-4000-9000-${(++ids).toString(16).padStart(12, '0')}` },
    });
  });
  afterAll(async () => {
    await h.close();
  });

  const q = <R extends Record<string, unknown>>(sql: string, params: unknown[] = []) =>
    h.db.query<R>(sql, params);
  const caller = { actor: 'ci-bot', correlationId: 'corr' };

  /** The commit a finishing refresh makes: source refresh, based on the run's version. */
  const refreshCommit = async (doc: StateDocumentV4, baseVersion: number) => {
    const command = h.commitCommand('prod', doc, { source: 'refresh', actor: 'ci-bot' });
    const withBase = {
      ...command,
      data: { ...command.data, baseVersion },
    } as StateCommand;
    const { position } = await h.store.handle(stateStreamId('prod'), withBase, withBase.metadata);
    if (position) await runner.waitForPosition(position);
  };

  const start = async (dryRun: boolean, fromVersion: number, fromSerial: number) => {
    const id = deciders.newId();
    await deciders.execute(REFRESH_RUN, {
      type: 'StartRefresh',
      data: { runId: id, stateId, stateName: 'prod', fromVersion, fromSerial, dryRun },
      metadata: deciders.context(caller),
    });
    return id;
  };

  it('records a run and its results as they arrive, counting distinct instances', async () => {
    await h.commit('prod', docOf(1, ['a', 'b', 'c']), {}, runner);
    stateId = await h.stateId('prod');
    runId = await start(false, 1, 1);
    expect(
      await q('SELECT status, checked, changed, failed, dry_run, actor FROM refresh_runs'),
    ).toEqual([
      { status: 'running', checked: 0, changed: 0, failed: 0, dry_run: false, actor: 'ci-bot' },
    ]);

    const batch = [
      result('terraform_data.web[0]', 'drifted', ['input.value']),
      result('terraform_data.web[1]', 'failed'),
    ];
    await deciders.execute(REFRESH_RUN, {
      type: 'RecordRefreshResults',
      data: { runId, results: batch },
      metadata: deciders.context(caller),
    });
    // The same batch again (a retry), then a better answer for web[1], then web[2].
    for (const results of [
      batch,
      [result('terraform_data.web[1]', 'unchanged')],
      [result('terraform_data.web[2]', 'drifted', ['input.value'])],
    ]) {
      await deciders.execute(REFRESH_RUN, {
        type: 'RecordRefreshResults',
        data: { runId, results },
        metadata: deciders.context(caller),
      });
    }
    expect(await q('SELECT checked, changed, failed FROM refresh_runs')).toEqual([
      { checked: 3, changed: 2, failed: 0 },
    ]);
    expect(
      await q('SELECT address, outcome, changed_paths FROM refresh_results ORDER BY address'),
    ).toEqual([
      { address: 'terraform_data.web[0]', outcome: 'drifted', changed_paths: ['input.value'] },
      { address: 'terraform_data.web[1]', outcome: 'unchanged', changed_paths: [] },
      { address: 'terraform_data.web[2]', outcome: 'drifted', changed_paths: ['input.value'] },
    ]);
  });

  it('shows exactly the instances a refresh commit changed in current_resource_drift', async () => {
    await refreshCommit(docOf(2, ['A', 'b', 'C']), 1);
    await deciders.execute(REFRESH_RUN, {
      type: 'FinishRefresh',
      data: { runId, status: 'succeeded', errorSummary: null, toVersion: 2, toSerial: 2 },
      metadata: deciders.context(caller),
    });
    expect(
      await q(
        `SELECT status, to_version, to_serial, checked, changed, failed, finished_at IS NOT NULL AS done
           FROM refresh_runs`,
      ),
    ).toEqual([
      {
        status: 'succeeded',
        to_version: 2,
        to_serial: '2',
        checked: 3,
        changed: 2,
        failed: 0,
        done: true,
      },
    ]);
    expect(await q('SELECT * FROM current_resource_drift ORDER BY address')).toEqual([
      {
        state_name: 'prod',
        state_id: stateId,
        address: 'terraform_data.web[0]',
        type: 'terraform_data',
        provider: 'provider["terraform.io/builtin/terraform"]',
        previous_attributes: { id: 'id-web-0', input: { value: 'a', type: 'string' } },
        current_attributes: { id: 'id-web-0', input: { value: 'A', type: 'string' } },
        changed_paths: ['input.value'],
        detected_serial: '2',
        detected_version: 2,
        refresh_run_id: runId,
      },
      expect.objectContaining({
        address: 'terraform_data.web[2]',
        previous_attributes: { id: 'id-web-2', input: { value: 'c', type: 'string' } },
        current_attributes: { id: 'id-web-2', input: { value: 'C', type: 'string' } },
        changed_paths: ['input.value'],
        refresh_run_id: runId,
      }),
    ]);
  });

  it('keeps the drift through later refreshes, and computes paths when no run result exists', async () => {
    const dry = await start(true, 2, 2);
    await deciders.execute(REFRESH_RUN, {
      type: 'FinishRefresh',
      data: {
        runId: dry,
        status: 'succeeded',
        errorSummary: null,
        toVersion: null,
        toSerial: null,
      },
      metadata: deciders.context(caller),
    });
    // A refresh-sourced write without a finished run (e.g. an import of refreshed state).
    await refreshCommit(docOf(3, ['A', 'B', 'C']), 2);
    const drift = await q<{ address: string; changed_paths: string[]; refresh_run_id: string }>(
      'SELECT address, changed_paths, refresh_run_id FROM current_resource_drift ORDER BY address',
    );
    expect(drift).toEqual([
      { address: 'terraform_data.web[0]', changed_paths: ['input.value'], refresh_run_id: runId },
      { address: 'terraform_data.web[1]', changed_paths: ['input'], refresh_run_id: null },
      { address: 'terraform_data.web[2]', changed_paths: ['input.value'], refresh_run_id: runId },
    ]);
    expect(await q('SELECT status, to_version FROM refresh_runs WHERE run_id = $1', [dry])).toEqual(
      [{ status: 'succeeded', to_version: null }],
    );
    // Replaying the log rebuilds the same drift.
    const everything = await q('SELECT * FROM current_resource_drift ORDER BY address');
    await runner.rebuild();
    expect(await q('SELECT * FROM current_resource_drift ORDER BY address')).toEqual(everything);
  });

  it('clears the drift once terraform writes the state, even unchanged', async () => {
    await h.commit('prod', docOf(4, ['A', 'B', 'C']), {}, runner);
    expect(await q('SELECT address FROM current_resource_drift')).toEqual([]);
    // The SQL surface reads them through its filtered views (migration 013).
    const grants = await q<{ ok: boolean }>(
      `SELECT bool_and(has_table_privilege('kl_reader', 'kl_query.' || t, 'SELECT')) AS ok
         FROM unnest(ARRAY['refresh_runs', 'refresh_results', 'provider_configs',
                           'provider_schemas', 'current_resource_drift']) t`,
    );
    expect(grants).toEqual([{ ok: true }]);
  });

  it('leaves normalized reads out of the drift, and counts them and skipped built-ins apart', async () => {
    const run = await start(false, 4, 4);
    await deciders.execute(REFRESH_RUN, {
      type: 'RecordRefreshResults',
      data: {
        runId: run,
        results: [
          result('terraform_data.web[0]', 'normalized', ['input.value']),
          result('terraform_data.web[1]', 'drifted', ['input.value']),
          { ...result('terraform_data.web[2]', 'skipped'), afterHash: 'before-web-2' },
        ],
      },
      metadata: deciders.context(caller),
    });
    const counts = 'SELECT checked, changed, failed, normalized, skipped FROM refresh_runs';
    const expected = [{ checked: 2, changed: 1, failed: 0, normalized: 1, skipped: 1 }];
    expect(await q(`${counts} WHERE run_id = $1`, [run])).toEqual(expected);

    // The commit opens new lifecycles for both read-back instances.
    await refreshCommit(docOf(5, ['A.', 'B.', 'C']), 4);
    await deciders.execute(REFRESH_RUN, {
      type: 'FinishRefresh',
      data: { runId: run, status: 'succeeded', errorSummary: null, toVersion: 5, toSerial: 5 },
      metadata: deciders.context(caller),
    });
    expect(await q(`${counts} WHERE run_id = $1`, [run])).toEqual(expected);
    expect(
      await q('SELECT address, changed_paths, refresh_run_id FROM current_resource_drift'),
    ).toEqual([
      { address: 'terraform_data.web[1]', changed_paths: ['input.value'], refresh_run_id: run },
    ]);
    expect(
      await q('SELECT outcome FROM refresh_results WHERE run_id = $1 ORDER BY address', [run]),
    ).toEqual([{ outcome: 'normalized' }, { outcome: 'drifted' }, { outcome: 'skipped' }]);
  });

  it('projects provider configs as stored, and their removal', async () => {
    const config = { region: 'eu-west-1', secret_key: { env: 'AWS_SECRET_ACCESS_KEY' } };
    for (const [alias, c] of [
      [null, config],
      ['east', { region: 'us-east-1' }],
      [null, { ...config, region: 'eu-central-1' }],
    ] as const) {
      await deciders.execute(PROVIDER_CONFIGS, {
        type: 'ConfigureProvider',
        data: { state: 'prod', source: AWS, alias, config: c },
        metadata: deciders.context({ actor: 'ops', correlationId: 'c' }),
      });
    }
    await deciders.execute(PROVIDER_CONFIGS, {
      type: 'RemoveProviderConfig',
      data: { state: 'prod', source: AWS, alias: 'east' },
      metadata: deciders.context({ actor: 'ops', correlationId: 'c' }),
    });
    expect(
      await q('SELECT state_name, source, alias, config, updated_by FROM provider_configs'),
    ).toEqual([
      {
        state_name: 'prod',
        source: AWS,
        alias: '',
        config: { ...config, region: 'eu-central-1' },
        updated_by: 'ops',
      },
    ]);
  });

  it('changes nothing when a batch is applied again, and a rebuild yields the same rows', async () => {
    const projectors = refreshProjectors();
    const log = await wholeLog(h.events, () => h.events.readAll(LOG_START, 100_000));
    const before = await snapshotTables(h.db, REFRESH_TABLES);
    for (const projector of projectors) {
      const handled = log.filter((e) => projector.handles.includes(e.type));
      await h.db.transaction((tx) => projector.apply(handled, tx));
      await h.db.transaction((tx) => projector.apply(handled.slice(-3), tx));
    }
    expect(await snapshotTables(h.db, REFRESH_TABLES)).toEqual(before);

    await runner.rebuild();
    expect(await snapshotTables(h.db, REFRESH_TABLES)).toEqual(before);
    expect(before.refresh_runs).toHaveLength(3);
    expect(before.refresh_results).toHaveLength(6);
  });
});
