import request from 'supertest';
import { startServer, KldServer } from '../../src/app/server';
import {
  addressCandidate,
  Candidate,
  candidateCovers,
  moduleCandidate,
  parsedAddress,
  selectorCandidate,
} from '../../src/domain/state-engine/scope';
import {
  buildDocument,
  InstanceObjectV4,
  ResourceMode,
  stateDocumentText,
  StateDocumentV4,
} from '../../src/domain/terraform';
import { loadConfig } from '../../src/infrastructure/config/config';
import type { Database } from '../../src/infrastructure/postgres/database';
import {
  DescriptorColumns,
  descriptorOf,
} from '../../src/infrastructure/read-models/resource-descriptor-row';
import {
  DocumentMetaColumns,
  documentMetaOf,
} from '../../src/infrastructure/read-models/document-meta-row';
import { StateEngineReadModel } from '../../src/infrastructure/read-models/state-engine-read-model';
import { createTestDatabase, quietLogger, TestDatabase } from '../support/test-database';
import { oneResourceState } from '../../bench/support/one-resource-state';
import { fuzzSeeds, seededRandom, seedRange, withSeed } from '../support/seeded-random';

const BIG_NUMBER = '123456789012345678901234567890.000000000000000000001';
const KEYS = ['a', 'ключ', 'emoji 🙂', 'quote"and\\backslash', 'tab\tnew\nline', 'z'];
const MODULES = ['', '', 'module.net', 'module.app[0]', 'module.app["ü"].module.inner'];
const TEXTS = ['plain', 'ünïcødé ☃', '日本語', '\u0000\u001f control', '</script>', ''];

/**
 * A random valid state: resources in and out of modules, managed and data,
 * without keys and with number or string keys (unicode, quotes, newlines),
 * deposed objects, tainted ones, big attribute values, sensitive values and
 * outputs, numbers a double cannot hold. Its text, for the big numbers.
 */
function randomState(seed: number, serial: number, lineage: string): string {
  const r = seededRandom(seed);
  const value = (depth: number): unknown => {
    switch (r.int(depth > 2 ? 4 : 7)) {
      case 0:
        return r.pick(TEXTS);
      case 1:
        return r.pick([0, -1, 3.25, 1e21, 2 ** 53 + 2, '__BIG__']);
      case 2:
        return r.pick([true, false, null]);
      case 3:
        return `${r.pick(TEXTS)}-${r.int(1000)}`;
      case 4:
        return Array.from({ length: r.int(4) }, () => value(depth + 1));
      case 5:
        return Object.fromEntries(
          Array.from({ length: r.int(4) }, (_, i) => [`${r.pick(TEXTS)}${i}`, value(depth + 1)]),
        );
      default:
        return 'x'.repeat(r.int(3) === 0 ? 200_000 : 50);
    }
  };
  const resources: unknown[] = [];
  const names = new Set<string>();
  const count = r.int(9);
  for (let n = 0; n < count; n++) {
    const module = r.pick(MODULES);
    const mode: ResourceMode = r.int(5) === 0 ? 'data' : 'managed';
    const type = r.pick(['terraform_data', 'null_resource', 'aws_s3_bucket']);
    const name = `r${n}`;
    const id = `${module}/${mode}/${type}/${name}`;
    if (names.has(id)) continue;
    names.add(id);
    const each = r.pick([null, 'list', 'map'] as const);
    const keys: (number | string | undefined)[] =
      each === null
        ? [undefined]
        : each === 'list'
          ? Array.from({ length: 1 + r.int(12) }, (_, i) => i)
          : KEYS.filter(() => r.int(2) === 0);
    const instances: unknown[] = [];
    for (const key of keys) {
      const objects = mode === 'managed' && r.int(4) === 0 ? 2 : 1;
      for (let o = 0; o < objects; o++) {
        const sensitive = r.int(3) === 0;
        instances.push({
          ...(key === undefined ? {} : { index_key: key }),
          ...(o === 1 ? { deposed: `${r.int(0xffffff).toString(16).padStart(8, '0')}` } : {}),
          ...(mode === 'managed' && r.int(6) === 0 ? { status: 'tainted' } : {}),
          schema_version: r.int(3),
          attributes: {
            id: `${name}-${String(key)}-${o}`,
            value: value(0),
            ...(sensitive ? { password: `secret ${r.pick(TEXTS)}` } : {}),
          },
          sensitive_attributes: sensitive ? [[{ type: 'get_attr', value: 'password' }]] : [],
          ...(r.int(3) === 0 ? { private: 'eyJzY2hlbWFfdmVyc2lvbiI6IjEifQ==' } : {}),
          ...(mode === 'managed' && r.int(3) === 0 ? { dependencies: ['terraform_data.r0'] } : {}),
          ...(r.int(4) === 0 ? { create_before_destroy: true } : {}),
        });
      }
    }
    resources.push({
      ...(module === '' ? {} : { module }),
      mode,
      type,
      name,
      ...(each === null ? {} : { each }),
      provider: 'provider["registry.terraform.io/hashicorp/null"]',
      instances,
    });
  }
  const outputs: Record<string, unknown> = {
    plain: { value: r.pick(TEXTS), type: 'string' },
    secret: { value: 'hunter2 ☃', type: 'string', sensitive: true },
    big: { value: '__BIG__', type: 'number' },
  };
  const doc = {
    version: 4,
    terraform_version: '1.11.4',
    serial,
    lineage,
    outputs,
    resources,
    check_results: null,
  };
  return JSON.stringify(doc).replaceAll('"__BIG__"', BIG_NUMBER);
}

/** The candidate sets asked of a state: every type, modules, some addresses, and none. */
function candidateSets(text: string, seed: number): { body: object; candidates: Candidate[] }[] {
  const doc = JSON.parse(text) as StateDocumentV4;
  const r = seededRandom(seed);
  const types = [...new Set(doc.resources.map((x) => x.type))];
  const addresses = doc.resources
    .filter(() => r.int(2) === 0)
    .map(
      (x) =>
        `${x.module ? `${x.module}.` : ''}${x.mode === 'data' ? 'data.' : ''}${x.type}.${x.name}`,
    );
  const keyed = doc.resources.find((x) => x.instances[0]?.index_key !== undefined && !x.module);
  if (keyed) {
    addresses.push(`${keyed.type}.${keyed.name}[${JSON.stringify(keyed.instances[0].index_key)}]`);
  }
  return [
    {
      body: { selectors: types.map((type) => ({ type })) },
      candidates: types.map((type) => selectorCandidate({ type })),
    },
    {
      body: { module_prefixes: ['module.app', 'module.net'] },
      candidates: [moduleCandidate('module.app'), moduleCandidate('module.net')],
    },
    { body: { addresses }, candidates: addresses.map(addressCandidate) },
    {
      body: { addresses: ['terraform_data.nothing_here'] },
      candidates: [addressCandidate('terraform_data.nothing_here')],
    },
  ];
}

interface RowWithInstance extends DescriptorColumns {
  address: string;
  instance: InstanceObjectV4;
}

/**
 * The slice built whole, as kld built it before it was read in pages: every
 * row of the version with its object, those the candidates cover, one
 * document, its text.
 */
async function wholeSlice(
  db: Database,
  name: string,
  candidates: Candidate[],
  version: number,
): Promise<string> {
  const [state] = await db.query<{ state_id: string }>(
    'SELECT state_id FROM states WHERE name = $1',
    [name],
  );
  const [v] = await db.query<DocumentMetaColumns>(
    `SELECT serial, lineage, terraform_version, outputs, check_results, extra
       FROM state_versions WHERE state_id = $1 AND version = $2`,
    [state.state_id, version],
  );
  const rows = await db.query<RowWithInstance>(
    `SELECT address, module_path, mode, type, name, provider, each_mode, resource_extra, instance
       FROM resources
      WHERE state_id = $1 AND create_version <= $2
        AND (delete_version IS NULL OR delete_version > $2)`,
    [state.state_id, version],
  );
  const picked = rows.filter((row) =>
    candidates.some((c) => candidateCovers(c, parsedAddress(row.address))),
  );
  return stateDocumentText(
    buildDocument(
      documentMetaOf(v),
      picked.map((row) => ({ resource: descriptorOf(row), instance: row.instance })),
    ),
  );
}

const resourceAddress = (x: StateDocumentV4['resources'][number]) =>
  `${x.module ? `${x.module}.` : ''}${x.mode === 'data' ? 'data.' : ''}${x.type}.${x.name}`;

/** Does a module prefix name this module path: itself, any of its instances, anything under it? */
const underModule = (prefix: string, module: string | undefined) =>
  module !== undefined &&
  (module === prefix || module.startsWith(`${prefix}[`) || module.startsWith(`${prefix}.`));

/**
 * What docs/state-engine.md says a scope expansion of these module prefixes
 * answers, worked out from the document alone: the resources in scope; the
 * closure (what they depend on, transitively, then what depends on them,
 * transitively); and provably safe only when every prefix names something
 * and every dependency reached is a resource in the state.
 */
function expectedScope(doc: StateDocumentV4, prefixes: string[]) {
  const live = doc.resources.filter((x) => x.instances.length > 0);
  const realized = new Set(live.map(resourceAddress));
  const dependsOn = new Map<string, Set<string>>();
  for (const x of live) {
    for (const o of x.instances) {
      for (const d of o.dependencies ?? []) {
        const from = dependsOn.get(resourceAddress(x)) ?? new Set<string>();
        dependsOn.set(resourceAddress(x), from.add(d));
      }
    }
  }
  const reach = (from: Iterable<string>, next: (a: string) => string[]) => {
    const seen = new Set<string>();
    const frontier = [...from];
    while (frontier.length > 0) {
      for (const n of next(frontier.pop()!)) {
        if (!seen.has(n)) frontier.push(n);
        seen.add(n);
      }
    }
    return seen;
  };
  const scope = new Set(
    live.filter((x) => prefixes.some((p) => underModule(p, x.module))).map(resourceAddress),
  );
  const up = reach(scope, (a) => [...(dependsOn.get(a) ?? [])]);
  const down = reach(scope, (a) =>
    [...dependsOn].filter(([, to]) => to.has(a)).map(([from]) => from),
  );
  const dependencies = [...up].filter((a) => !scope.has(a));
  const dependents = [...down].filter((a) => !scope.has(a) && !up.has(a));
  const namesSomething = prefixes.every((p) => doc.resources.some((x) => underModule(p, x.module)));
  return {
    scope: [...scope].sort(),
    dependencies: dependencies.sort(),
    dependents: dependents.sort(),
    provablySafe: scope.size > 0 && namesSomething && dependencies.every((a) => realized.has(a)),
  };
}

async function joined(pieces: AsyncIterable<string>): Promise<string> {
  const all: string[] = [];
  for await (const piece of pieces) all.push(piece);
  return all.join('');
}

/** A page at a time, a piece per part: every edge between pages and pieces is crossed. */
const TINY = { rows: 3, bytes: 2000, pieceChars: 1 };

describe('state-engine slices read in pages', () => {
  let t: TestDatabase;
  let server: KldServer;
  const http = () => server.app.getHttpServer();

  beforeAll(async () => {
    t = await createTestDatabase();
    server = await startServer(
      loadConfig({ KL_DATABASE_URL: t.url, KL_LISTEN: '127.0.0.1:0', KL_GRPC_LISTEN: 'off' }),
      quietLogger,
    );
  }, 120_000);
  afterAll(async () => {
    await server.close();
    await t.drop();
  });

  async function commit(name: string, text: string): Promise<void> {
    await request(http())
      .post(`/v1/states/${name}`)
      .set('Content-Type', 'application/json')
      .send(text)
      .expect(200);
    // The engine's metadata waits for the read models to take every acknowledged write.
    await request(http()).get(`/v1/engine/states/${name}`).expect(200);
  }

  it('serves the same bytes as the slice built whole, for random states and every edge', async () => {
    for (const seed of fuzzSeeds(seedRange(1, 8))) await withSeed(seed, () => sameBytes(seed));
  }, 120_000);

  async function sameBytes(seed: number): Promise<void> {
    const name = `team/random-${seed}`;
    const text = randomState(seed, 1, `lineage-${seed}`);
    await commit(name, text);
    for (const { body, candidates } of candidateSets(text, seed)) {
      const expected = await wholeSlice(t.db, name, candidates, 1);
      const served = await request(http())
        .post(`/v1/engine/states/${name}/slice`)
        .set('Content-Type', 'application/json')
        .send(JSON.stringify(body))
        .buffer(true)
        .parse((res, done) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => done(null, Buffer.concat(chunks).toString('utf8')));
        })
        .expect(200);
      expect(served.body).toBe(expected);
      const paged = await new StateEngineReadModel(t.db, TINY).slice(name, candidates);
      expect(await joined(paged.text())).toBe(expected);
      expect(served.headers['x-kilolock-slice-instances']).toBe(String(paged.instanceCount));
    }
  }

  /** Asks the scope of `prefixes` with its slice, and checks the answer against the docs. */
  async function scopeAnswers(name: string, doc: StateDocumentV4, prefixes: string[]) {
    const served = await request(http())
      .post(`/v1/engine/states/${name}/scope`)
      .set('Content-Type', 'application/json')
      .send(JSON.stringify({ module_prefixes: prefixes, slice: true }))
      .buffer(true)
      .parse((res, done) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => done(null, Buffer.concat(chunks).toString('utf8')));
      })
      .expect(200);
    const answer = served.body as string;
    const parsed = JSON.parse(answer) as {
      scope: { address: string }[];
      closure: { address: string; direction: 'dependency' | 'dependent' }[];
      provably_safe: boolean;
      slice?: { bytes: number };
    };
    const closure = (direction: string) =>
      parsed.closure
        .filter((c) => c.direction === direction)
        .map((c) => c.address)
        .sort();
    const expected = expectedScope(doc, prefixes);
    expect({
      prefixes,
      scope: parsed.scope.map((x) => x.address).sort(),
      dependencies: closure('dependency'),
      dependents: closure('dependent'),
      provablySafe: parsed.provably_safe,
    }).toEqual({ prefixes, ...expected });
    if (!expected.provablySafe) {
      expect({ prefixes, slice: parsed.slice }).toEqual({ prefixes, slice: undefined });
      return;
    }
    // The slice is of the candidates themselves: the closure is reserved, never sent.
    const whole = await wholeSlice(t.db, name, prefixes.map(moduleCandidate), 1);
    expect(answer.endsWith(`"document":${whole}}}`)).toBe(true);
    expect(parsed.slice?.bytes).toBe(Buffer.byteLength(whole));
  }

  it.each(fuzzSeeds([3]))(
    'answers a scope with its closure, and the slice built whole and its length when provably safe (seed %i)',
    (seed) =>
      withSeed(seed, async () => {
        const name = `team/scope-${seed}`;
        const text = randomState(seed, 1, 'scope');
        await commit(name, text);
        for (const prefixes of [['module.app'], ['module.net'], ['module.app', 'module.net']]) {
          await scopeAnswers(name, JSON.parse(text) as StateDocumentV4, prefixes);
        }
      }),
    60_000,
  );

  it('answers a safe scope with its slice and an unsafe one without, whatever the seed', async () => {
    // module.app depends on a root resource; module.net on one the state does not hold.
    const instance = (id: string, dependencies?: string[]) => ({
      schema_version: 0,
      attributes: { id },
      sensitive_attributes: [],
      ...(dependencies ? { dependencies } : {}),
    });
    const resource = (module: string | undefined, name: string, dependencies?: string[]) => ({
      ...(module ? { module } : {}),
      mode: 'managed',
      type: 'terraform_data',
      name,
      provider: 'provider["terraform.io/builtin/terraform"]',
      instances: [instance(`${module ?? 'root'}-${name}`, dependencies)],
    });
    const doc = {
      version: 4,
      terraform_version: '1.11.4',
      serial: 1,
      lineage: 'scope-fixed',
      outputs: {},
      resources: [
        resource(undefined, 'r0'),
        resource(undefined, 'after', ['module.app[0].terraform_data.x']),
        resource('module.app[0]', 'x', ['terraform_data.r0']),
        resource('module.net', 'y', ['terraform_data.gone']),
      ],
      check_results: null,
    } as unknown as StateDocumentV4;
    await commit('team/scope-fixed', JSON.stringify(doc));
    expect(expectedScope(doc, ['module.app'])).toEqual({
      scope: ['module.app[0].terraform_data.x'],
      dependencies: ['terraform_data.r0'],
      dependents: ['terraform_data.after'],
      provablySafe: true,
    });
    expect(expectedScope(doc, ['module.net']).provablySafe).toBe(false);
    await scopeAnswers('team/scope-fixed', doc, ['module.app']);
    await scopeAnswers('team/scope-fixed', doc, ['module.net']);
  }, 60_000);

  it('reads a page at a time as the reader takes it, of one version while commits land', async () => {
    const name = 'team/moving';
    const v1 = JSON.stringify(
      oneResourceState({
        serial: 1,
        count: 40,
        lineage: 'moving',
        attributes: (i) => ({ id: `v1-${i}` }),
        outputs: { o: { value: 'one', type: 'string' } },
      }),
    );
    await commit(name, v1);
    let pageReads = 0;
    const counted = {
      pool: {
        query: (...args: unknown[]) => {
          if (String(args[0]).includes('unnest($2::text[], $3::integer[])')) pageReads += 1;
          return (t.db.pool.query as (...a: unknown[]) => Promise<unknown>)(...args);
        },
      },
      transaction: t.db.transaction.bind(t.db),
    } as unknown as Database;
    const candidates = [selectorCandidate({ type: 'terraform_data' })];
    const slice = await new StateEngineReadModel(counted, {
      rows: 4,
      bytes: 1 << 20,
      pieceChars: 1,
    }).slice(name, candidates);
    const pieces = slice.text();
    const taken: string[] = [];
    // The reader takes the answer's start, up to its first instances.
    while (!taken.join('').includes('"v1-0"')) taken.push((await pieces.next()).value as string);
    // Its first page, and the next read ahead; built whole, all 10 were read before the first byte.
    expect(pageReads).toBe(2);

    // A commit changes every instance and removes half of them meanwhile.
    const v2 = JSON.parse(v1) as StateDocumentV4;
    v2.serial = 2;
    v2.outputs = { o: { value: 'two', type: 'string' } };
    v2.resources[0].instances = v2.resources[0].instances
      .filter((_, i) => i % 2 === 0)
      .map((o) => ({ ...o, attributes: { id: String(o.attributes!.id).replace('v1', 'v2') } }));
    await commit(name, JSON.stringify(v2));

    taken.push(await joined({ [Symbol.asyncIterator]: () => pieces }));
    expect(pageReads).toBe(10);
    const whole = taken.join('');
    expect(whole).toBe(await wholeSlice(t.db, name, candidates, 1));
    expect(whole).not.toBe(await wholeSlice(t.db, name, candidates, 2));
    expect(whole).not.toContain('v2-');
  }, 60_000);

  it('lets two slices at most read their rows at once, the others in turn', async () => {
    const name = 'team/many';
    await commit(name, JSON.stringify(oneResourceState({ serial: 1, count: 40, lineage: 'many' })));
    // A slice's reads are open from the moment it asks for its transaction to the
    // transaction's end: counted so, how many overlap does not hang on how long they take.
    let open = 0;
    let most = 0;
    const counted = {
      pool: t.db.pool,
      transaction: <T>(fn: (client: unknown) => Promise<T>) => {
        most = Math.max(most, ++open);
        return t.db.transaction(fn).finally(() => (open -= 1));
      },
    } as unknown as Database;
    const engine = new StateEngineReadModel(counted);
    const candidates = [selectorCandidate({ type: 'terraform_data' })];
    const expected = await wholeSlice(t.db, name, candidates, 1);
    const texts = await Promise.all(
      Array.from({ length: 6 }, async () => joined((await engine.slice(name, candidates)).text())),
    );
    expect(texts).toEqual(Array.from({ length: 6 }, () => expected));
    expect(most).toBe(2);
  }, 60_000);
});
