import { randomUUID } from 'node:crypto';
import * as http from 'node:http';
import { SEPARATE_RESOURCE_LOOKUPS } from '../../src/infrastructure/read-models/state-engine-read-model';
import { KldProcess, startKld } from '../support/kld-process';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/**
 * The state-engine API (docs/state-engine.md) over raw HTTP against a real
 * kld: metadata, scope expansion with its closure and classifications,
 * slices, a write's reservations holding off terraform (the coarse lock),
 * the delta commit, and its refusals storing nothing.
 */

jest.setTimeout(90_000);

let t: TestDatabase;
let kld: KldProcess;

beforeAll(async () => {
  t = await createTestDatabase('kl_state_engine_api');
  kld = await startKld({ KL_DATABASE_URL: t.url });
});

afterAll(async () => {
  await kld?.stop();
  await t?.drop();
});

interface Answer {
  status: number;
  text: string;
  headers: http.IncomingHttpHeaders;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  json: any;
}

function call(method: string, path: string, body?: unknown, actor = 'alice'): Promise<Answer> {
  const text = body === undefined ? undefined : JSON.stringify(body);
  const url = new URL(path, kld.url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        hostname: url.hostname,
        port: url.port,
        path: url.pathname + url.search,
        method,
        agent: false,
        headers: {
          'X-Kilolock-Actor': actor,
          ...(text === undefined ? {} : { 'Content-Type': 'application/json' }),
        },
      },
      (res) => {
        let answer = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (answer += chunk));
        res.on('end', () => {
          let json: unknown = null;
          try {
            json = answer === '' ? {} : JSON.parse(answer);
          } catch {
            json = null;
          }
          resolve({ status: res.statusCode ?? 0, text: answer, headers: res.headers, json });
        });
      },
    );
    req.on('error', reject);
    req.end(text);
  });
}

function instance(id: string, deps: string[] = []) {
  return {
    schema_version: 0,
    attributes: { id, input: null, output: null, triggers_replace: null },
    sensitive_attributes: [],
    ...(deps.length ? { dependencies: deps } : {}),
  };
}

function resource(name: string, deps: string[] = [], module?: string) {
  return {
    ...(module ? { module } : {}),
    mode: 'managed',
    type: 'terraform_data',
    name,
    provider: 'provider["terraform.io/builtin/terraform"]',
    instances: [instance(`${module ?? ''}${name}`, deps)],
  };
}

function doc(serial: number, lineage: string, resources: unknown[]) {
  return {
    version: 4,
    terraform_version: '1.11.4',
    serial,
    lineage,
    outputs: { greeting: { value: 'hi', type: 'string' } },
    resources,
    check_results: null,
  };
}

/** v1: a, b → a, c → b, d, module.net.x; v2: d removed. */
async function newState(): Promise<{ name: string; lineage: string }> {
  const name = `engine/${randomUUID().slice(0, 8)}`;
  const lineage = randomUUID();
  const base = [
    resource('a'),
    resource('b', ['terraform_data.a']),
    resource('c', ['terraform_data.b']),
    resource('x', [], 'module.net'),
  ];
  expect(
    (await call('POST', `/v1/states/${name}`, doc(1, lineage, [...base, resource('d')]))).status,
  ).toBe(200);
  expect((await call('POST', `/v1/states/${name}`, doc(2, lineage, base))).status).toBe(200);
  return { name, lineage };
}

async function current(name: string) {
  const r = await call('GET', `/v1/states/${name}`);
  expect(r.status).toBe(200);
  return { version: Number(r.headers['x-kilolock-state-version']), doc: r.json };
}

function addressesOf(d: { resources: { module?: string; type: string; name: string }[] }) {
  return d.resources.map((r) => `${r.module ? `${r.module}.` : ''}${r.type}.${r.name}`).sort();
}

describe('state-engine API', () => {
  it('reports its protocol and a state metadata', async () => {
    const { name, lineage } = await newState();
    const p = await call('GET', '/v1/engine');
    expect(p.status).toBe(200);
    expect(p.json.protocol_version).toBe(1);
    expect(p.json.operations).toEqual(
      expect.arrayContaining(['scope', 'slice', 'delta-commit', 'scope-slice']),
    );
    const m = await call('GET', `/v1/engine/states/${name}`);
    expect(m.status).toBe(200);
    expect(m.json).toMatchObject({
      state: name,
      lineage,
      serial: 2,
      version: 2,
      instance_count: 4,
      resource_count: 4,
      protocol_version: 1,
    });
    const missing = await call('GET', '/v1/engine/states/engine/nothing-here');
    expect(missing.status).toBe(404);
    expect(missing.json.error.code).toBe('STATE.NOT_FOUND');
  });

  it('expands a scope: closure both ways with reasons, classifications, reservations, safety', async () => {
    const { name } = await newState();
    const r = await call('POST', `/v1/engine/states/${name}/scope`, {
      addresses: ['terraform_data.b', 'terraform_data.support', 'terraform_data.d'],
      module_prefixes: ['module.ghost'],
    });
    expect(r.status).toBe(200);
    expect(r.json.version).toBe(2);
    expect(r.json.scope).toEqual([
      {
        address: 'terraform_data.b',
        instances: ['terraform_data.b'],
        matched_by: ['terraform_data.b'],
      },
    ]);
    expect(r.json.closure).toEqual([
      {
        address: 'terraform_data.a',
        direction: 'dependency',
        via: 'terraform_data.b',
        reason: 'terraform_data.b depends on it',
      },
      {
        address: 'terraform_data.c',
        direction: 'dependent',
        via: 'terraform_data.b',
        reason: 'it depends on terraform_data.b',
      },
    ]);
    expect(r.json.unresolved).toEqual([
      { candidate: 'terraform_data.support', kind: 'address', classification: 'undeployed' },
      { candidate: 'terraform_data.d', kind: 'address', classification: 'removed' },
      { candidate: 'module.ghost', kind: 'module', classification: 'unknown' },
    ]);
    expect(r.json.reservations).toEqual({
      write: ['terraform_data.b', 'terraform_data.d', 'terraform_data.support'],
      read: ['terraform_data.a', 'terraform_data.c'],
    });
    expect(r.json.provably_safe).toBe(false);
    expect(r.json.reasons).toEqual([
      'module module.ghost matches nothing in this state, now or before',
    ]);

    const safe = await call('POST', `/v1/engine/states/${name}/scope`, {
      addresses: ['terraform_data.c'],
      module_prefixes: ['module.net'],
      selectors: [{ type: 'terraform_data', module: 'module.net' }],
    });
    expect(safe.status).toBe(200);
    expect(safe.json.scope.map((s: { address: string }) => s.address)).toEqual([
      'module.net.terraform_data.x',
      'terraform_data.c',
    ]);
    // c → b → a, transitively.
    expect(safe.json.closure.map((c: { address: string }) => c.address)).toEqual([
      'terraform_data.b',
      'terraform_data.a',
    ]);
    expect(safe.json.closure[1].reason).toBe('terraform_data.b depends on it');
    expect(safe.json.provably_safe).toBe(true);
  });

  it('answers a scope with its slice in one exchange when asked, only when it proves the scope safe', async () => {
    const { name } = await newState();
    const candidates = { addresses: ['terraform_data.c'], module_prefixes: ['module.net'] };
    const both = await call('POST', `/v1/engine/states/${name}/scope`, {
      ...candidates,
      slice: true,
    });
    expect(both.status).toBe(200);
    const alone = await call('POST', `/v1/engine/states/${name}/scope`, candidates);
    const { slice, ...scope } = both.json;
    // The scope's answer as without the slice, with the state's instance count.
    expect(scope).toEqual(alone.json);
    expect(scope).toMatchObject({ provably_safe: true, version: 2, instance_count: 4 });
    expect(alone.json.slice).toBeUndefined();
    expect(both.headers['x-kilolock-slice-instances']).toBe('2');
    expect(alone.headers['x-kilolock-slice-instances']).toBeUndefined();
    const separate = await call('POST', `/v1/engine/states/${name}/slice`, candidates);
    expect(slice).toEqual({
      version: 2,
      serial: 2,
      instances: 2,
      bytes: Buffer.byteLength(separate.text),
      document: separate.json,
    });

    const unsafe = await call('POST', `/v1/engine/states/${name}/scope`, {
      addresses: ['terraform_data.b'],
      module_prefixes: ['module.ghost'],
      slice: true,
    });
    expect(unsafe.status).toBe(200);
    expect(unsafe.json.provably_safe).toBe(false);
    expect(unsafe.json.slice).toBeUndefined();
  });

  it('refuses a malformed scope request and changes nothing', async () => {
    const { name } = await newState();
    for (const body of [
      { addresses: ['not an address!'] },
      { addresses: 'terraform_data.a' },
      { module_prefixes: ['terraform_data.a'] },
      { selectors: [{ module: 'module.net' }] },
      { candidates: [] },
      { addresses: ['terraform_data.a'], slice: 'yes' },
    ]) {
      const r = await call('POST', `/v1/engine/states/${name}/scope`, body);
      expect({ body, status: r.status, code: r.json?.error?.code }).toEqual({
        body,
        status: 400,
        code: 'REQUEST.INVALID',
      });
    }
    expect((await current(name)).version).toBe(2);
  });

  it('answers a scope and a slice that name nothing: an empty scope, not provably safe, and no instances', async () => {
    const { name, lineage } = await newState();
    for (const body of [{}, { addresses: [] }]) {
      const scope = await call('POST', `/v1/engine/states/${name}/scope`, body);
      expect({ body, status: scope.status }).toEqual({ body, status: 200 });
      expect(scope.json).toMatchObject({ scope: [], closure: [], provably_safe: false });
      const slice = await call('POST', `/v1/engine/states/${name}/slice`, body);
      expect({ body, status: slice.status }).toEqual({ body, status: 200 });
      expect(slice.json).toMatchObject({ serial: 2, lineage, resources: [] });
    }
  });

  it('serves a slice: only the asked resources, every output, the trunk lineage and serial', async () => {
    const { name, lineage } = await newState();
    const r = await call('POST', `/v1/engine/states/${name}/slice`, {
      addresses: ['terraform_data.b'],
      module_prefixes: ['module.net'],
    });
    expect(r.status).toBe(200);
    expect(r.headers['x-kilolock-state-version']).toBe('2');
    expect(r.headers['x-kilolock-slice-instances']).toBe('2');
    expect(r.json).toMatchObject({
      version: 4,
      serial: 2,
      lineage,
      outputs: { greeting: { value: 'hi', type: 'string' } },
    });
    expect(addressesOf(r.json)).toEqual(['module.net.terraform_data.x', 'terraform_data.b']);
    // The instance exactly as the trunk holds it.
    const trunk = (await current(name)).doc;
    const fromTrunk = trunk.resources.find((x: { name: string }) => x.name === 'b');
    expect(r.json.resources.find((x: { name: string }) => x.name === 'b')).toEqual(fromTrunk);

    const past = await call('POST', `/v1/engine/states/${name}/slice`, {
      addresses: ['terraform_data.d'],
      version: 1,
    });
    expect(past.status).toBe(200);
    expect(past.json.serial).toBe(1);
    expect(addressesOf(past.json)).toEqual(['terraform_data.d']);
    const none = await call('POST', `/v1/engine/states/${name}/slice`, { version: 99 });
    expect(none.status).toBe(404);
    expect(none.json.error.code).toBe('VERSION.NOT_FOUND');
  });

  it('a write holds off terraform with a LockInfo naming it, commits one state-engine version, then terraform locks', async () => {
    const { name, lineage } = await newState();
    const started = await call(
      'POST',
      `/v1/engine/states/${name}/runs`,
      {
        operation: 'state rm',
        base_version: 2,
        write: ['terraform_data.c'],
        info: { addresses: ['terraform_data.c'] },
      },
      'eve',
    );
    expect(started.status).toBe(201);
    const runId = started.json.run_id as string;
    expect(started.json.reservations).toEqual([
      expect.objectContaining({ glob: 'terraform_data.c', mode: 'write' }),
    ]);

    const lockInfo = {
      ID: randomUUID(),
      Operation: 'OperationTypeApply',
      Info: '',
      Who: 'bob@laptop',
      Version: '1.11.4',
      Created: new Date().toISOString(),
      Path: '',
    };
    const refused = await call('LOCK', `/v1/states/${name}`, lockInfo, 'bob');
    expect(refused.status).toBe(423);
    expect(refused.json).toMatchObject({
      ID: runId,
      Who: 'eve',
      Operation: 'state-engine: state rm',
    });
    expect(refused.json.Created).toBe(
      started.json.reservations[0].expires_at ? refused.json.Created : '',
    );
    expect(Date.parse(refused.json.Created)).not.toBeNaN();

    const committed = await call(
      'POST',
      `/v1/engine/states/${name}/runs/${runId}/commit`,
      { base_version: 2, terraform_version: '1.11.4', deletes: ['terraform_data.c'] },
      'eve',
    );
    expect(committed.status).toBe(200);
    expect(committed.json).toEqual({ run_id: runId, version: 3, serial: 3 });
    const after = await current(name);
    expect(after.version).toBe(3);
    expect(after.doc.lineage).toBe(lineage);
    expect(after.doc.serial).toBe(3);
    expect(addressesOf(after.doc)).toEqual([
      'module.net.terraform_data.x',
      'terraform_data.a',
      'terraform_data.b',
    ]);
    const history = await call('GET', `/v1/api/states/${name}/history`);
    expect(history.json.versions[2]).toMatchObject({
      version: 3,
      source: 'state-engine',
      actor: 'eve',
    });
    const run = await call('GET', `/v1/api/apply-runs/${runId}`);
    expect(run.json).toMatchObject({ status: 'committed', lane: 'state-engine', actor: 'eve' });
    expect(run.json.info).toMatchObject({ state_engine_operation: 'state rm' });

    // Released with the commit: terraform locks again.
    expect((await call('LOCK', `/v1/states/${name}`, lockInfo, 'bob')).status).toBe(200);
    expect((await call('UNLOCK', `/v1/states/${name}`, lockInfo, 'bob')).status).toBe(200);
  });

  it('refuses a stale delta commit and one outside its reservations, writing nothing', async () => {
    const { name } = await newState();
    const a = await call('POST', `/v1/engine/states/${name}/runs`, {
      operation: 'state rm',
      base_version: 2,
      write: ['terraform_data.a'],
    });
    expect(a.status).toBe(201);
    const outside = await call('POST', `/v1/engine/states/${name}/runs/${a.json.run_id}/commit`, {
      base_version: 2,
      terraform_version: '1.11.4',
      deletes: ['terraform_data.b'],
    });
    expect(outside.status).toBe(409);
    expect(outside.json.error.code).toBe('RESERVATION.NOT_HELD');
    expect(outside.json.error.addresses).toEqual(['terraform_data.b']);
    expect((await current(name)).version).toBe(2);
    await call('POST', `/v1/engine/states/${name}/runs/${a.json.run_id}/finish`, {
      status: 'aborted',
    });

    // Someone changes a after version 2 (terraform itself, on the other lane).
    const trunk = (await current(name)).doc;
    trunk.serial = 3;
    trunk.resources[0].instances[0].attributes.id = 'a-changed';
    expect((await call('POST', `/v1/states/${name}`, trunk)).status).toBe(200);
    const late = await call('POST', `/v1/engine/states/${name}/runs`, {
      operation: 'state rm',
      base_version: 2,
      write: ['terraform_data.b'],
    });
    expect(late.status).toBe(201);
    const stale = await call('POST', `/v1/engine/states/${name}/runs/${late.json.run_id}/commit`, {
      base_version: 2,
      terraform_version: '1.11.4',
      deletes: ['terraform_data.a'],
    });
    expect(stale.status).toBe(409);
    // Outside its reservation first: a is not b's.
    expect(stale.json.error.code).toBe('RESERVATION.NOT_HELD');
    await call('POST', `/v1/engine/states/${name}/runs/${late.json.run_id}/finish`, {
      status: 'aborted',
    });

    // A write planned on version 2 is refused when it asks for a, which changed in 3…
    const startStale = await call('POST', `/v1/engine/states/${name}/runs`, {
      operation: 'state rm',
      base_version: 2,
      write: ['terraform_data.a'],
    });
    expect(startStale.status).toBe(409);
    expect(startStale.json.error.code).toBe('APPLY.STALE');
    expect(startStale.json.error.addresses).toEqual([
      { address: 'terraform_data.a', changed_in_version: 3 },
    ]);
    // …and so is a delta computed on version 2 by a run that holds a.
    const mine = await call('POST', `/v1/engine/states/${name}/runs`, {
      operation: 'state rm',
      base_version: 3,
      write: ['terraform_data.a'],
    });
    expect(mine.status).toBe(201);
    const refused = await call(
      'POST',
      `/v1/engine/states/${name}/runs/${mine.json.run_id}/commit`,
      {
        base_version: 2,
        terraform_version: '1.11.4',
        deletes: ['terraform_data.a'],
      },
    );
    expect(refused.status).toBe(409);
    expect(refused.json.error.code).toBe('APPLY.STALE');
    expect(refused.json.error.addresses).toEqual([
      { address: 'terraform_data.a', changed_in_version: 3 },
    ]);
    const after = await current(name);
    expect(after.version).toBe(3);
    expect(addressesOf(after.doc)).toContain('terraform_data.a');
  });
  it("takes the client's run id (a retried start is the same run) and checks write_set/read_set for staleness", async () => {
    const { name } = await newState();
    const runs = `/v1/engine/states/${name}/runs`;
    const held = async () =>
      (await call('GET', `/v1/api/states/${name}/reservations`)).json.reservations as unknown[];

    const bad = await call('POST', runs, {
      operation: 'apply',
      run_id: 'not-a-uuid',
      base_version: 2,
      write: ['terraform_data.a'],
    });
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toContain('run_id must be a uuid');
    expect(await held()).toEqual([]);

    const runId = randomUUID();
    const start = {
      operation: 'apply',
      run_id: runId,
      base_version: 2,
      write: ['terraform_data.a'],
      write_set: ['terraform_data.a'],
      read_set: ['terraform_data.b'],
    };
    const first = await call('POST', runs, start);
    expect(first.status).toBe(201);
    expect(first.json).toMatchObject({ run_id: runId, operation: 'apply' });
    const again = await call('POST', runs, start);
    expect(again.status).toBe(201);
    expect(again.json.reservations).toEqual(first.json.reservations);
    expect(await held()).toHaveLength(1);
    await call('POST', `${runs}/${runId}/finish`, { status: 'aborted' });

    // b (only read) changes after version 2: a start planned on 2 that read it is stale.
    const trunk = (await current(name)).doc;
    trunk.serial = 3;
    trunk.resources[1].instances[0].attributes.id = 'b-changed';
    expect((await call('POST', `/v1/states/${name}`, trunk)).status).toBe(200);
    const stale = await call('POST', runs, { ...start, run_id: randomUUID() });
    expect(stale.status).toBe(409);
    expect(stale.json.error.code).toBe('APPLY.STALE');
    expect(stale.json.error.addresses).toEqual([
      { address: 'terraform_data.b', changed_in_version: 3 },
    ]);
    expect(await held()).toEqual([]);
  });

  it('matches module prefixes at their boundary, keys exactly, and walks every path of a closure', async () => {
    const name = `engine/${randomUUID().slice(0, 8)}`;
    const counted = (n: string, keys: (number | string)[], module?: string) => ({
      ...resource(n, [], module),
      each: typeof keys[0] === 'string' ? 'map' : 'list',
      instances: keys.map((k) => ({ index_key: k, ...instance(`${n}${k}`) })),
    });
    const state = doc(1, randomUUID(), [
      // d → b → a and d → c → a: a diamond.
      resource('a'),
      resource('b', ['terraform_data.a']),
      resource('c', ['terraform_data.a']),
      resource('d', ['terraform_data.b', 'terraform_data.c']),
      counted('tag', [0, 1, 2, 10]),
      counted('env', ['1', 'prod']),
      resource('x', [], 'module.net'),
      resource('w', [], 'module.net.module.sub'),
      resource('y', [], 'module.network'),
      resource('z', [], 'module.n_t'),
      resource('v', [], 'module.nXt'),
      { ...resource('p', [], 'module.pool["a"]') },
      resource('q', [], 'module.poolside'),
    ]);
    expect((await call('POST', `/v1/states/${name}`, state)).status).toBe(200);
    const instances = async (body: unknown) => {
      const r = await call('POST', `/v1/engine/states/${name}/slice`, body);
      expect(r.status).toBe(200);
      return r.json.resources
        .flatMap((x: { module?: string; name: string; instances: { index_key?: unknown }[] }) =>
          x.instances.map(
            (i) =>
              `${x.module ? `${x.module}.` : ''}${x.name}${i.index_key === undefined ? '' : `[${JSON.stringify(i.index_key)}]`}`,
          ),
        )
        .sort();
    };
    expect(await instances({ module_prefixes: ['module.net'] })).toEqual([
      'module.net.module.sub.w',
      'module.net.x',
    ]);
    // `_` is no wildcard; module.pool covers its instances, not module.poolside.
    expect(await instances({ module_prefixes: ['module.n_t', 'module.pool'] })).toEqual([
      'module.n_t.z',
      'module.pool["a"].p',
    ]);
    expect(
      await instances({
        addresses: ['terraform_data.tag[1]', 'terraform_data.tag[10]', 'terraform_data.env["1"]'],
      }),
    ).toEqual(['env["1"]', 'tag[10]', 'tag[1]']);
    expect(await instances({ addresses: ['terraform_data.env'] })).toEqual([
      'env["1"]',
      'env["prod"]',
    ]);

    const up = await call('POST', `/v1/engine/states/${name}/scope`, {
      addresses: ['terraform_data.d'],
    });
    expect(up.status).toBe(200);
    // Nearest first; a is reached through b and c, and names the least.
    expect(up.json.closure).toEqual([
      expect.objectContaining({ address: 'terraform_data.b', via: 'terraform_data.d' }),
      expect.objectContaining({ address: 'terraform_data.c', via: 'terraform_data.d' }),
      expect.objectContaining({ address: 'terraform_data.a', via: 'terraform_data.b' }),
    ]);
    const down = await call('POST', `/v1/engine/states/${name}/scope`, {
      addresses: ['terraform_data.a'],
    });
    expect(
      down.json.closure.map((c: { address: string; direction: string; via: string }) => [
        c.address,
        c.direction,
        c.via,
      ]),
    ).toEqual([
      ['terraform_data.b', 'dependent', 'terraform_data.a'],
      ['terraform_data.c', 'dependent', 'terraform_data.a'],
      ['terraform_data.d', 'dependent', 'terraform_data.b'],
    ]);
  });

  it('slices more whole-resource candidates than it looks up one by one: the same slice as in smaller requests', async () => {
    const name = `engine/${randomUUID().slice(0, 8)}`;
    const many = SEPARATE_RESOURCE_LOOKUPS + 40;
    const counted = (n: string, keys: number[]) => ({
      ...resource(n, []),
      each: 'list',
      instances: keys.map((k) => ({ index_key: k, ...instance(`${n}${k}`) })),
    });
    // Every third resource has three instances; some live in a module of the same names.
    const resources = Array.from({ length: many + 20 }, (_, i) =>
      i % 3 === 0
        ? counted(`r${i}`, [0, 1, 2])
        : resource(`r${i}`, i > 0 ? [`terraform_data.r${i - 1}`] : []),
    );
    resources.push(resource('r1', [], 'module.m'), resource('r2', [], 'module.m'));
    expect((await call('POST', `/v1/states/${name}`, doc(1, randomUUID(), resources))).status).toBe(
      200,
    );
    // Candidates: `many` resources of the state (r0..r{many-1}) and two it never held.
    const asked = [
      ...Array.from({ length: many }, (_, i) => `terraform_data.r${i}`),
      'terraform_data.never',
      'terraform_data.gone',
    ];
    expect(asked.length).toBeGreaterThan(SEPARATE_RESOURCE_LOOKUPS);
    const slice = async (addresses: string[]) => {
      const r = await call('POST', `/v1/engine/states/${name}/slice`, { addresses });
      expect(r.status).toBe(200);
      return r;
    };
    const all = await slice(asked);
    // The same candidates in requests small enough for one lookup per resource.
    const half = Math.ceil(asked.length / 2);
    const parts = [await slice(asked.slice(0, half)), await slice(asked.slice(half))];
    expect(parts.map((p) => p.json.resources.length).every((n: number) => n <= half)).toBe(true);
    const byAddress = (rs: { type: string; name: string; module?: string }[]) =>
      [...rs].sort((x, y) =>
        `${x.module ?? ''}.${x.name}`.localeCompare(`${y.module ?? ''}.${y.name}`),
      );
    expect(byAddress(all.json.resources)).toEqual(
      byAddress([...parts[0].json.resources, ...parts[1].json.resources]),
    );
    // And exactly the trunk's resources of those names at the root, not module.m's.
    const trunk = (await current(name)).doc;
    const wanted = new Set(asked);
    expect(byAddress(all.json.resources)).toEqual(
      byAddress(
        trunk.resources.filter(
          (x: { module?: string; type: string; name: string }) =>
            x.module === undefined && wanted.has(`${x.type}.${x.name}`),
        ),
      ),
    );
    expect(all.json.resources).toHaveLength(many);
    expect(all.headers['x-kilolock-slice-instances']).toBe(
      String(Math.ceil(many / 3) * 3 + (many - Math.ceil(many / 3))),
    );
  });
});
