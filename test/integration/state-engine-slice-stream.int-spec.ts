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
import { seededRandom } from '../support/seeded-random';

/** A small deterministic generator: the same states every run. */
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
    for (let seed = 1; seed <= 8; seed++) {
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
  }, 120_000);

  it('answers a scope with the slice built whole and its length in bytes', async () => {
    const name = 'team/scope';
    await commit(name, randomState(3, 1, 'scope'));
    const candidates = [moduleCandidate('module.app')];
    const expected = await wholeSlice(t.db, name, candidates, 1);
    const served = await request(http())
      .post(`/v1/engine/states/${name}/scope`)
      .set('Content-Type', 'application/json')
      .send(JSON.stringify({ module_prefixes: ['module.app'], slice: true }))
      .buffer(true)
      .parse((res, done) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => done(null, Buffer.concat(chunks).toString('utf8')));
      })
      .expect(200);
    const answer = served.body as string;
    expect(answer.endsWith(`"document":${expected}}}`)).toBe(true);
    const parsed = JSON.parse(answer) as { slice: { bytes: number } };
    expect(parsed.slice.bytes).toBe(Buffer.byteLength(expected));
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
    await commit(name, randomState(4, 1, 'many'));
    let open = 0;
    let most = 0;
    const counted = {
      pool: t.db.pool,
      transaction: <T>(fn: (client: unknown) => Promise<T>) =>
        t.db.transaction(async (client) => {
          most = Math.max(most, ++open);
          try {
            return await fn(client);
          } finally {
            open -= 1;
          }
        }),
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
