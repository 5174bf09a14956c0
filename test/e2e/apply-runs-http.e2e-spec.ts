import { randomUUID } from 'node:crypto';
import { KldProcess, startKld } from '../support/kld-process';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/**
 * The apply-run API (docs/api.md, "Apply runs") and terraform's LOCK as a
 * reservation, spoken by hand against a real `kld serve`. Every refusal is
 * checked to leave the event log untouched.
 */

jest.setTimeout(60_000);

interface Answer {
  status: number;
  text: string;
  json: Record<string, unknown> & { error?: Record<string, unknown> };
}

let t: TestDatabase;
let kld: KldProcess;

beforeAll(async () => {
  t = await createTestDatabase('kl_apply_http');
  kld = await startKld({ KL_DATABASE_URL: t.url });
});

afterAll(async () => {
  await kld?.stop();
  await t?.drop();
});

const unique = (prefix: string) => `team/${prefix}-${randomUUID().slice(0, 8)}`;
const PROVIDER = 'provider["terraform.io/builtin/terraform"]';

async function call(
  method: string,
  path: string,
  body?: string | object,
  actor = 'alice',
): Promise<Answer> {
  const text =
    body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
  const r = await fetch(`${kld.url}${path}`, {
    method,
    body: text,
    headers: {
      'X-Kilolock-Actor': actor,
      ...(text === undefined ? {} : { 'Content-Type': 'application/json' }),
    },
  });
  const answer = await r.text();
  let json: Answer['json'] = {};
  try {
    json = JSON.parse(answer) as Answer['json'];
  } catch {
    // not JSON: the test says what it expected
  }
  return { status: r.status, text: answer, json };
}

async function eventCount(): Promise<number> {
  const [row] = await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM kl_events');
  return row.n;
}

/** The request is refused with this status and code, and nothing is stored. */
async function refused(
  status: number,
  code: string,
  request: () => Promise<Answer>,
): Promise<Answer> {
  const before = await eventCount();
  const answer = await request();
  expect({ status: answer.status, code: answer.json.error?.code }).toEqual({ status, code });
  expect(typeof answer.json.error?.message).toBe('string');
  expect(await eventCount()).toBe(before);
  return answer;
}

function instance(key: number, input: string) {
  return {
    index_key: key,
    schema_version: 0,
    attributes: {
      id: `id-${key}`,
      input: { value: input, type: 'string' },
      output: { value: input, type: 'string' },
      triggers_replace: null,
    },
    sensitive_attributes: [],
  };
}

/** module.web.terraform_data.w[0..1], module.db.terraform_data.d, terraform_data.vpc. */
function doc(serial: number, lineage: string) {
  return {
    version: 4,
    terraform_version: '1.11.4',
    serial,
    lineage,
    outputs: { vpc: { value: 'vpc-1', type: 'string' } },
    resources: [
      {
        mode: 'managed',
        type: 'terraform_data',
        name: 'vpc',
        provider: PROVIDER,
        instances: [{ ...instance(0, 'vpc'), index_key: undefined }],
      },
      {
        module: 'module.db',
        mode: 'managed',
        type: 'terraform_data',
        name: 'd',
        provider: PROVIDER,
        instances: [{ ...instance(0, 'db'), index_key: undefined }],
      },
      {
        module: 'module.web',
        mode: 'managed',
        type: 'terraform_data',
        name: 'w',
        provider: PROVIDER,
        instances: [instance(0, 'w0'), instance(1, 'w1')],
      },
    ],
    check_results: null,
  };
}

const WEB_RESOURCE = {
  module: 'module.web',
  mode: 'managed',
  type: 'terraform_data',
  name: 'w',
  provider: PROVIDER,
  each: null,
};

async function newState(prefix: string): Promise<string> {
  const name = unique(prefix);
  const posted = await call('POST', `/v1/states/${name}`, doc(3, randomUUID()));
  expect(posted.status).toBe(200);
  return name;
}

const runs = (name: string) => `/v1/api/states/${name}/apply-runs`;

async function start(name: string, body: object, actor = 'alice'): Promise<string> {
  const r = await call('POST', runs(name), { base_version: 1, ...body }, actor);
  expect(r.status).toBe(201);
  return r.json.run_id as string;
}

function lockInfo(id: string, operation = 'OperationTypeApply') {
  return {
    ID: id,
    Operation: operation,
    Info: '',
    Who: `${id}@e2e`,
    Version: '1.11.4',
    Created: new Date().toISOString(),
    Path: '',
  };
}

describe('starting an apply run', () => {
  it('grants every reservation, recognises a retry, and shows the run', async () => {
    const name = await newState('start');
    const runId = randomUUID();
    const body = {
      run_id: runId,
      base_version: 1,
      write: ['module.web'],
      read: ['terraform_data.vpc'],
      write_set: ['module.web.terraform_data.w[0]'],
      read_set: ['terraform_data.vpc'],
      lease_seconds: 600,
      info: { plan: 'kl-plan.json', host: 'laptop' },
      lane: 'full',
    };
    const first = await call('POST', runs(name), body);
    expect(first.status).toBe(201);
    expect(first.json).toEqual({
      run_id: runId,
      state: name,
      reservations: [
        {
          id: expect.any(String),
          glob: 'module.web.*',
          mode: 'write',
          expires_at: expect.any(String),
        },
        {
          id: expect.any(String),
          glob: 'terraform_data.vpc',
          mode: 'read',
          expires_at: expect.any(String),
        },
      ],
      expires_at: expect.any(String),
    });
    const lease = Date.parse(first.json.expires_at as string) - Date.now();
    expect(lease).toBeGreaterThan(590_000);
    expect(lease).toBeLessThanOrEqual(600_000);

    // The same start again (its answer lost) changes nothing and answers the same.
    const before = await eventCount();
    const again = await call('POST', runs(name), body);
    expect(again.status).toBe(201);
    expect(again.json).toEqual(first.json);
    expect(await eventCount()).toBe(before);

    const listed = await call('GET', `/v1/api/states/${name}/reservations`);
    expect(listed.json.reservations).toEqual([
      expect.objectContaining({
        state: name,
        kind: 'apply',
        run_id: runId,
        glob: 'module.web.*',
        mode: 'write',
        actor: 'alice',
        info: null,
      }),
      expect.objectContaining({ glob: 'terraform_data.vpc', mode: 'read', info: null }),
    ]);
    // The run's info, once for all its reservations.
    expect(listed.json.runs).toEqual([
      { run_id: runId, state: name, info: { plan: 'kl-plan.json', host: 'laptop' } },
    ]);
    const run = await call('GET', `${runs(name)}/${runId}`);
    expect(run.json).toMatchObject({
      run_id: runId,
      state: name,
      actor: 'alice',
      status: 'running',
      lane: 'full',
      base_version: 1,
      write_set: ['module.web.terraform_data.w[0]'],
      read_set: ['terraform_data.vpc'],
      finished_at: null,
      committed_version: null,
    });
    expect((await call('GET', `/v1/api/apply-runs/${runId.toUpperCase()}`)).json).toEqual(run.json);
    // A listing gives the run without its sets and info: how many globs, the first few.
    const all = await call('GET', `/v1/api/apply-runs?state=${name}`);
    const { write_set, read_set, reservations, info, ...fields } = run.json;
    expect([write_set, read_set, reservations, info]).not.toContain(undefined);
    expect(all.json.runs).toEqual([
      {
        ...fields,
        write: { count: 1, first: ['module.web.*'] },
        read: { count: 1, first: ['terraform_data.vpc'] },
      },
    ]);
  });

  it('lists a run of many globs with its info once, not once per reservation', async () => {
    // `kl state rm` of N addresses reserves each and puts a line per address in its info: on
    // each row, 5,000 addresses made an answer of about 700 MB that kld could not build.
    const name = await newState('many');
    const write = Array.from({ length: 500 }, (_, i) => `terraform_data.x[${i}]`);
    const info = { preview: write.map((a) => `- ${a} ${'.'.repeat(100)}`) };
    const runId = await start(name, { write, info });
    for (const path of [`/v1/api/states/${name}/reservations`, '/v1/api/reservations']) {
      const listed = await call('GET', path);
      expect(listed.status).toBe(200);
      const mine = (listed.json.reservations as { run_id: string; glob: string }[]).filter(
        (r) => r.run_id === runId,
      );
      expect(mine.map((r) => r.glob).sort()).toEqual([...write].sort());
      expect((listed.json.runs as { run_id: string }[]).filter((r) => r.run_id === runId)).toEqual([
        { run_id: runId, state: name, info },
      ]);
      // One copy of the 64 KB info and 500 short rows, not 500 copies (32 MB).
      expect(listed.text.length).toBeLessThan(JSON.stringify(info).length + 500 * 400);
    }
    expect((await call('POST', `${runs(name)}/${runId}/abort`)).status).toBe(200);
  });

  it('refuses a conflicting run with every holder, and grants a disjoint one', async () => {
    const name = await newState('conflict');
    const web = await start(name, { write: ['module.web.*'] }, 'alice');
    await start(name, { write: ['module.db.*'] }, 'bob');
    const answer = await refused(409, 'RESERVATION.CONFLICT', () =>
      call(
        'POST',
        runs(name),
        {
          base_version: 1,
          write: ['module.web.terraform_data.w[1]', 'module.cache.*'],
          read: ['module.db.*'],
        },
        'carol',
      ),
    );
    expect(answer.json.error?.holders).toEqual([
      {
        kind: 'apply',
        glob: 'module.web.*',
        mode: 'write',
        actor: 'alice',
        run_id: web,
        lock_id: null,
        acquired_at: expect.any(String),
        expires_at: expect.any(String),
      },
      expect.objectContaining({ glob: 'module.db.*', actor: 'bob' }),
    ]);
    expect(answer.json.error?.message).toContain(`held by alice, run ${web}`);
    // Only carol's cache reservation was free: all or nothing, so nothing.
    expect(
      ((await call('GET', `/v1/api/states/${name}/reservations`)).json.reservations as unknown[])
        .length,
    ).toBe(2);
    await start(name, { write: ['module.cache.*'], read: ['terraform_data.vpc'] }, 'carol');
  });

  it('refuses a stale plan, naming what changed and when', async () => {
    const name = await newState('stale');
    const lineage = ((await call('GET', `/v1/states/${name}`)).json.lineage as string) ?? '';
    const changed = doc(4, lineage);
    changed.resources[0].instances[0].attributes.input.value = 'vpc-2';
    expect((await call('POST', `/v1/states/${name}`, changed)).status).toBe(200);
    const answer = await refused(409, 'APPLY.STALE', () =>
      call('POST', runs(name), {
        base_version: 1,
        write: ['module.web.*'],
        write_set: ['module.web.terraform_data.w[0]'],
        read_set: ['terraform_data.vpc'],
      }),
    );
    expect(answer.json.error?.addresses).toEqual([
      { address: 'terraform_data.vpc', changed_in_version: 2 },
    ]);
    expect(answer.json.error?.message).toMatch(/re-plan$/);
    await start(name, {
      base_version: 2,
      write: ['module.web.*'],
      read_set: ['terraform_data.vpc'],
    });
  });

  it('refuses what is not a run, storing nothing', async () => {
    const name = await newState('bad');
    const cases: [number, string, string | object][] = [
      [400, 'REQUEST.INVALID', '{"base_version": 1, "write": ["x.y"]'],
      [400, 'REQUEST.INVALID', '[]'],
      [400, 'REQUEST.INVALID', { base_version: 1, write: ['x.y'], surprise: true }],
      [400, 'REQUEST.INVALID', { base_version: 0, write: ['x.y'] }],
      [400, 'REQUEST.INVALID', { base_version: 1 }],
      [400, 'REQUEST.INVALID', { base_version: 1, write: 'x.y' }],
      [400, 'REQUEST.INVALID', { base_version: 1, write: ['x.y\u0000'] }],
      [400, 'REQUEST.INVALID', { base_version: 1, write: ['x.y'], run_id: 'run-1' }],
      [400, 'REQUEST.INVALID', { base_version: 1, write: ['x.y'], lane: 'fast' }],
      [400, 'RESERVATION.GLOB_INVALID', { base_version: 1, write: ['module.a["x.*"].b'] }],
      [400, 'RESERVATION.GLOB_INVALID', { base_version: 1, write: ['x.y.*'] }],
      [400, 'RESERVATION.GLOB_INVALID', { base_version: 1, write: ['x.y'], read_set: ['nope'] }],
      [400, 'APPLY.INVALID', { base_version: 1, write: ['x.y'], lease_seconds: 1 }],
      [400, 'APPLY.INVALID', { base_version: 9, write: ['x.y'] }],
    ];
    for (const [status, code, body] of cases) {
      await refused(status, code, () => call('POST', runs(name), body));
    }
    await refused(404, 'STATE.NOT_FOUND', () =>
      call('POST', runs(unique('missing')), { base_version: 1, write: ['*'] }),
    );
    const probe = unique('probe');
    expect((await call('LOCK', `/v1/states/${probe}`, lockInfo('P'))).status).toBe(200);
    await refused(409, 'APPLY.NO_VERSION', () =>
      call('POST', runs(probe), { base_version: 1, write: ['*'] }),
    );
  });
});

describe('heartbeat, commit, finish and abort', () => {
  it('renews the lease, refuses once the run was reclaimed', async () => {
    const name = await newState('beat');
    const runId = await start(name, { write: ['module.web.*'], lease_seconds: 5 });
    const beat = await call('POST', `${runs(name)}/${runId}/heartbeat`, { lease_seconds: 300 });
    expect(beat.status).toBe(200);
    expect(Date.parse(beat.json.expires_at as string) - Date.now()).toBeGreaterThan(290_000);
    // An empty body takes the default lease (15 minutes).
    const plain = await call('POST', `${runs(name)}/${runId}/heartbeat`);
    expect(Date.parse(plain.json.expires_at as string) - Date.now()).toBeGreaterThan(890_000);
    await refused(400, 'REQUEST.INVALID', () =>
      call('POST', `${runs(name)}/${runId}/heartbeat`, { lease: 3 }),
    );
    await refused(404, 'APPLY.NOT_FOUND', () =>
      call('POST', `${runs(name)}/${randomUUID()}/heartbeat`, {}),
    );
    await refused(404, 'APPLY.NOT_FOUND', () =>
      call('POST', `${runs(unique('other'))}/${runId}/heartbeat`, {}),
    );

    // A short lease that runs out is reclaimed by the next conflicting start.
    const short = await start(name, { write: ['module.db.*'], lease_seconds: 5 });
    await new Promise((r) => setTimeout(r, 5200));
    const taker = await start(name, { write: ['module.db.*'] }, 'bob');
    const reclaimed = await t.db.query<{ run: string; by: string }>(
      `SELECT data->>'runId' AS run, data->>'reclaimedBy' AS by FROM kl_events
        WHERE type = 'ReservationExpired' AND stream_id = $1`,
      [`state-${name}`],
    );
    expect(reclaimed).toEqual([{ run: short, by: taker }]);
    const late = await refused(409, 'RESERVATION.EXPIRED', () =>
      call('POST', `${runs(name)}/${short}/heartbeat`, {}),
    );
    expect(late.json.error?.message).toContain('reclaimed');
  });

  it('commits the row-level change as one version, exactly as sent, once', async () => {
    const name = await newState('commit');
    const runId = await start(name, { write: ['module.web.*'] });
    // Terraform's member order, and a number no double holds.
    const sent =
      '{"base_version":1,"terraform_version":"1.11.5","upserts":[{"address":' +
      '"module.web.terraform_data.w[1]","resource":' +
      JSON.stringify(WEB_RESOURCE) +
      ',"instance":{"index_key":1,"schema_version":0,"attributes":{"zeta":18446744073709551617,' +
      '"id":"id-1","input":{"value":"w1-new","type":"string"}},"sensitive_attributes":[]}}],' +
      '"deletes":["module.web.terraform_data.w[0]"],"outputs":{"set":{"web":{"value":"new",' +
      '"type":"string","sensitive":false}},"remove":["vpc"]},"counters":{"add":0,"change":1,"destroy":1}}';
    const committed = await call('POST', `${runs(name)}/${runId}/commit`, sent);
    expect(committed.status).toBe(200);
    expect(committed.json).toEqual({ version: 2, serial: 4 });

    const got = await fetch(`${kld.url}/v1/states/${name}`);
    expect(got.headers.get('x-kilolock-state-version')).toBe('2');
    const served = await got.text();
    expect(served).toContain(
      '"attributes": {\n            "zeta": 18446744073709551617,\n            "id": "id-1",',
    );
    const parsed = JSON.parse(served) as ReturnType<typeof doc>;
    expect(parsed).toMatchObject({ serial: 4, terraform_version: '1.11.5' });
    expect(parsed.outputs).toEqual({ web: { value: 'new', type: 'string' } });
    expect(parsed.resources.map((r) => [r.module ?? '', r.instances.length])).toEqual([
      ['', 1],
      ['module.db', 1],
      ['module.web', 1],
    ]);

    // Retried (the answer lost): the same version, nothing new.
    const before = await eventCount();
    const again = await call('POST', `${runs(name)}/${runId}/commit`, sent);
    expect(again.json).toEqual({ version: 2, serial: 4 });
    expect(await eventCount()).toBe(before);

    const run = await call('GET', `${runs(name)}/${runId}`);
    expect(run.json).toMatchObject({
      status: 'committed',
      committed_version: 2,
      committed_serial: 4,
      counters: { add: 0, change: 1, destroy: 1 },
    });
    expect((await call('GET', `/v1/api/states/${name}/reservations`)).json.reservations).toEqual(
      [],
    );
    const history = await call('GET', `/v1/api/states/${name}/history`);
    expect((history.json.versions as { source: string; actor: string }[])[1]).toMatchObject({
      source: 'apply',
      actor: 'alice',
    });
    // A run that ended takes no other ending.
    await refused(409, 'APPLY.FINISHED', () =>
      call('POST', `${runs(name)}/${runId}/finish`, { status: 'failed' }),
    );
  });

  it('refuses a commit outside the write reservations, stale, or malformed, storing nothing', async () => {
    const name = await newState('refusals');
    const runId = await start(name, {
      write: ['module.web.terraform_data.w[0]'],
      read: ['module.db.*'],
    });
    const upsert = (key: number, extra: object = {}) => ({
      address: `module.web.terraform_data.w[${key}]`,
      resource: WEB_RESOURCE,
      instance: { ...instance(key, 'x'), ...extra },
    });
    const body = (change: object) => ({
      base_version: 1,
      terraform_version: '1.11.4',
      upserts: [],
      deletes: [],
      outputs: { set: {}, remove: [] },
      ...change,
    });
    const commit = (change: object) => () =>
      call('POST', `${runs(name)}/${runId}/commit`, body(change));

    const outside = await refused(409, 'RESERVATION.NOT_HELD', commit({ upserts: [upsert(1)] }));
    expect(outside.json.error?.addresses).toEqual(['module.web.terraform_data.w[1]']);
    // A read reservation lets a run read, not write.
    await refused(409, 'RESERVATION.NOT_HELD', commit({ deletes: ['module.db.terraform_data.d'] }));
    await refused(
      400,
      'APPLY.INVALID',
      commit({ upserts: [{ ...upsert(0), address: 'module.web.terraform_data.w[7]' }] }),
    );
    await refused(400, 'APPLY.INVALID', commit({ base_version: 5 }));
    const missing = await refused(
      400,
      'REQUEST.INVALID',
      commit({ upserts: [upsert(0, { schema_version: 'x' })] }),
    );
    expect(missing.json.error?.message).toBe(
      'upserts[0].instance.schema_version must be an integer',
    );
    await refused(400, 'REQUEST.INVALID', commit({ terraform_version: '' }));
    await refused(
      400,
      'REQUEST.INVALID',
      commit({ upserts: [{ ...upsert(0), resource: { ...WEB_RESOURCE, extra: 1 } }] }),
    );
    await refused(400, 'REQUEST.INVALID', commit({ counters: { add: -1 } }));
    await refused(400, 'REQUEST.INVALID', () => call('POST', `${runs(name)}/${runId}/commit`, '{'));
    await refused(400, 'REQUEST.INVALID', () =>
      call('POST', `${runs(name)}/not-a-uuid/commit`, body({})),
    );
    await refused(404, 'APPLY.NOT_FOUND', () =>
      call('POST', `${runs(name)}/${randomUUID()}/commit`, body({})),
    );

    // Stale: terraform changed w[0] after version 1, while no run held it.
    const lineage = (await call('GET', `/v1/states/${name}`)).json.lineage as string;
    await call('POST', `${runs(name)}/${runId}/abort`);
    const changed = doc(4, lineage);
    changed.resources[2].instances[0].attributes.input.value = 'w0-by-terraform';
    expect((await call('POST', `/v1/states/${name}`, changed)).status).toBe(200);
    const fresh = await start(name, { base_version: 1, write: ['module.web.*'] });
    const stale = await refused(409, 'APPLY.STALE', () =>
      call('POST', `${runs(name)}/${fresh}/commit`, body({ upserts: [upsert(0)] })),
    );
    expect(stale.json.error?.addresses).toEqual([
      { address: 'module.web.terraform_data.w[0]', changed_in_version: 2 },
    ]);
  });

  it('finishes a run that did not commit, keeping what terraform left', async () => {
    const name = await newState('finish');
    const runId = await start(name, { write: ['*'] });
    await refused(400, 'REQUEST.INVALID', () =>
      call('POST', `${runs(name)}/${runId}/finish`, { status: 'committed' }),
    );
    await refused(400, 'REQUEST.INVALID', () =>
      call('POST', `${runs(name)}/${runId}/finish`, { status: 'failed', output_state: 'text' }),
    );
    const left =
      '{"status":"failed","error_summary":"Error: boom\\nmore","output_state":' +
      '{"version":4,"serial":9,"x":123456789012345678901234567890}}';
    const finished = await call('POST', `${runs(name)}/${runId}/finish`, left);
    expect(finished.status).toBe(200);
    expect(finished.json).toEqual({ run_id: runId, state: name, status: 'failed' });
    const run = await call('GET', `${runs(name)}/${runId}`);
    expect(run.json).toMatchObject({
      status: 'failed',
      error_summary: 'Error: boom\nmore',
      output_state: `/v1/api/states/${name}/apply-runs/${runId}/output-state`,
    });
    const kept = await call('GET', run.json.output_state as string);
    expect(kept.text).toBe('{"version":4,"serial":9,"x":123456789012345678901234567890}');
    expect((await call('GET', `/v1/api/states/${name}/reservations`)).json.reservations).toEqual(
      [],
    );
    // Retried: the same; another ending: refused.
    expect((await call('POST', `${runs(name)}/${runId}/finish`, left)).status).toBe(200);
    await refused(409, 'APPLY.FINISHED', () =>
      call('POST', `${runs(name)}/${runId}/finish`, { status: 'conflict' }),
    );
    // An operator's abort of a run that already ended says how it ended.
    const before = await eventCount();
    const late = await call('POST', `${runs(name)}/${runId}/abort`);
    expect(late.json).toEqual({ run_id: runId, state: name, status: 'failed', released: 0 });
    expect(await eventCount()).toBe(before);
    await refused(404, 'APPLY.NOT_FOUND', () =>
      call('GET', `/v1/api/states/${name}/apply-runs/${randomUUID()}/output-state`),
    );
  });

  it('aborts a dead run by its id alone, and refuses what is not one', async () => {
    const name = await newState('abort');
    const runId = await start(name, { write: ['module.web.*'], read: ['*'] });
    const aborted = await call('POST', `/v1/api/apply-runs/${runId}/abort`, undefined, 'operator');
    expect(aborted.json).toEqual({ run_id: runId, state: name, status: 'aborted', released: 2 });
    expect((await call('GET', `${runs(name)}/${runId}`)).json).toMatchObject({
      status: 'aborted',
      finished_by: 'operator',
    });
    expect((await call('GET', `/v1/api/states/${name}/reservations`)).json.reservations).toEqual(
      [],
    );
    await refused(404, 'APPLY.NOT_FOUND', () =>
      call('POST', `/v1/api/apply-runs/${randomUUID()}/abort`),
    );
    await refused(400, 'REQUEST.INVALID', () =>
      call('POST', `${runs(name)}/${runId}/abort`, { now: true }),
    );
    await refused(404, 'APPLY.NOT_FOUND', () =>
      call('GET', `/v1/api/states/${unique('elsewhere')}/apply-runs/${runId}`),
    );
    await refused(400, 'REQUEST.INVALID', () => call('GET', '/v1/api/apply-runs?limit=0'));
    await refused(404, 'STATE.NOT_FOUND', () =>
      call('GET', `/v1/api/states/${unique('nowhere')}/reservations`),
    );
  });
});

describe("terraform's lock as a reservation", () => {
  const lock = (name: string, info: object) => call('LOCK', `/v1/states/${name}`, info);
  const unlock = (name: string, info: object) => call('UNLOCK', `/v1/states/${name}`, info);

  it('refuses LOCK, POST and DELETE while a run holds, with a LockInfo naming the run', async () => {
    const name = await newState('tf-vs-run');
    const runId = await start(
      name,
      { write: ['module.web.*'], read: ['terraform_data.vpc'] },
      'alice',
    );
    for (const request of [
      () => lock(name, lockInfo(randomUUID())),
      () => lock(name, lockInfo(randomUUID(), 'OperationTypePlan')),
      () => call('POST', `/v1/states/${name}`, doc(9, 'x')),
      () => call('DELETE', `/v1/states/${name}`),
    ]) {
      const before = await eventCount();
      const r = await request();
      expect(r.status).toBe(423);
      expect(r.json).toEqual({
        ID: runId,
        Operation: 'kl apply',
        Info: expect.stringContaining('write module.web.*, read terraform_data.vpc'),
        Who: 'alice',
        Version: '',
        Created: expect.any(String),
        Path: '',
      });
      expect(await eventCount()).toBe(before);
    }
    // A run that only reads leaves room for plans.
    await call('POST', `${runs(name)}/${runId}/abort`);
    await start(name, { read: ['*'] });
    expect((await lock(name, lockInfo('plan-1', 'OperationTypePlan'))).status).toBe(200);
  });

  it('shares plan locks, makes a writer wait for them, and releases one plan at a time', async () => {
    const name = await newState('plans');
    const plans = [1, 2, 3].map((i) => lockInfo(`plan-${i}`, 'OperationTypePlan'));
    for (const p of plans) expect((await lock(name, p)).status).toBe(200);
    const writer = await lock(name, lockInfo('apply-1'));
    expect(writer.status).toBe(423);
    expect(writer.json).toEqual(plans[0]);
    await refused(409, 'RESERVATION.CONFLICT', () =>
      call('POST', runs(name), { base_version: 1, write: ['module.web.*'] }),
    );
    // A run that only reads shares with plans.
    await start(name, { read: ['module.web.*'] });
    const listed = (await call('GET', `/v1/api/states/${name}/reservations`)).json.reservations as {
      kind: string;
      id: string;
      glob: string;
      mode: string;
    }[];
    expect(listed.map((r) => [r.kind, r.glob, r.mode])).toEqual([
      ['terraform-plan', '*', 'read'],
      ['terraform-plan', '*', 'read'],
      ['terraform-plan', '*', 'read'],
      ['apply', 'module.web.*', 'read'],
    ]);
    const locks = (await call('GET', '/v1/api/locks')).json.locks as {
      name: string;
      mode: string;
    }[];
    expect(locks.filter((l) => l.name === name).map((l) => l.mode)).toEqual([
      'read',
      'read',
      'read',
    ]);

    expect((await unlock(name, plans[1])).status).toBe(200);
    // Force-unlocking one plan lock by its ID leaves the others.
    const forced = await call('POST', `/v1/api/states/${name}/force-unlock`, { lock_id: 'plan-3' });
    expect(forced.json).toEqual({ state: name, released: 'plan-3' });
    const left = (await call('GET', '/v1/api/locks')).json.locks as {
      name: string;
      lockId: string;
    }[];
    expect(left.filter((l) => l.name === name).map((l) => l.lockId)).toEqual(['plan-1']);
    // A retried UNLOCK of a plan lock already gone is fine.
    expect((await unlock(name, plans[1])).status).toBe(200);
    expect((await unlock(name, plans[0])).status).toBe(200);
  });
});
