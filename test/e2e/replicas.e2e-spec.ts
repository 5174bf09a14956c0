import { createHash, randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { KldProcess, startKld } from '../support/kld-process';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/**
 * Two `kld serve` processes on one database (KL_DATABASE_URL): a write
 * answered by one is what the other serves next, and a lock race split across
 * both has exactly one winner.
 */

jest.setTimeout(120_000);

interface Answer {
  status: number;
  headers: Headers;
  text: string;
}

let t: TestDatabase;
let a: KldProcess;
let b: KldProcess;

beforeAll(async () => {
  t = await createTestDatabase('kl_replicas');
  [a, b] = await Promise.all([
    startKld({ KL_DATABASE_URL: t.url }),
    startKld({ KL_DATABASE_URL: t.url }),
  ]);
});

afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
  await t?.drop();
});

async function call(method: string, url: string, body?: string): Promise<Answer> {
  const headers = body === undefined ? undefined : { 'Content-Type': 'application/json' };
  const r = await fetch(url, { method, body, headers });
  return { status: r.status, headers: r.headers, text: await r.text() };
}

const stateUrl = (kld: KldProcess, name: string) => `${kld.url}/v1/states/${name}`;

function doc(serial: number, lineage: string, tag: string): Record<string, unknown> {
  return {
    version: 4,
    terraform_version: '1.11.4',
    serial,
    lineage,
    outputs: { tag: { value: tag, type: 'string' } },
    resources: [
      {
        mode: 'managed',
        type: 'terraform_data',
        name: 'r',
        provider: 'provider["terraform.io/builtin/terraform"]',
        instances: [
          {
            schema_version: 0,
            attributes: {
              id: `id-${tag}`,
              input: { value: tag, type: 'string' },
              output: { value: tag, type: 'string' },
              triggers_replace: null,
            },
            sensitive_attributes: [],
          },
        ],
      },
    ],
    check_results: null,
  };
}

function lockInfo(id: string): Record<string, string> {
  return {
    ID: id,
    Operation: 'OperationTypeApply',
    Info: '',
    Who: `racer-${id}@e2e`,
    Version: '1.11.4',
    Created: new Date().toISOString(),
    Path: '',
  };
}

function expectServed(r: Answer, expected: unknown, context: string): void {
  try {
    expect(r.status).toBe(200);
    expect(r.headers.get('content-md5')).toBe(createHash('md5').update(r.text).digest('base64'));
    expect(JSON.parse(r.text)).toEqual(expected);
  } catch (err) {
    throw new Error(`${context}: ${r.status} ${r.text.slice(0, 300)}\n${err}`);
  }
}

describe('two kld processes on one database', () => {
  it('serves on one replica what was just committed on the other, every time (50 rounds each way)', async () => {
    const name = `team/replicas/${randomUUID().slice(0, 8)}`;
    const lineage = randomUUID();
    let serial = 0;
    for (let round = 0; round < 50; round++) {
      for (const [writer, reader, label] of [
        [a, b, 'A→B'],
        [b, a, 'B→A'],
      ] as const) {
        serial++;
        const d = doc(serial, lineage, `${label}-${round}`);
        const posted = await call('POST', stateUrl(writer, name), JSON.stringify(d));
        expect(posted.status).toBe(200);
        expectServed(
          await call('GET', stateUrl(reader, name)),
          d,
          `round ${round} ${label} serial ${serial}`,
        );
      }
    }
    // Every version is there, and an old one is served the same by both.
    const [{ n }] = await t.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM state_versions v JOIN states s USING (state_id)
        WHERE s.name = $1 AND s.deleted_at IS NULL`,
      [name],
    );
    expect(n).toBe(100);
    const oldA = await call('GET', `${stateUrl(a, name)}?serial=17`);
    const oldB = await call('GET', `${stateUrl(b, name)}?serial=17`);
    expect(oldA.status).toBe(200);
    expect(oldB.text).toBe(oldA.text);
    expect((JSON.parse(oldA.text) as { serial: number }).serial).toBe(17);
  });

  it('serves a 3000-instance commit whole from the other replica (commits larger than a projection batch)', async () => {
    const name = `team/replicas/big-${randomUUID().slice(0, 8)}`;
    const lineage = randomUUID();
    const big = (serial: number, changedBelow: number) => ({
      ...doc(serial, lineage, `big-${serial}`),
      resources: [
        {
          mode: 'managed',
          type: 'terraform_data',
          name: 'many',
          provider: 'provider["terraform.io/builtin/terraform"]',
          instances: Array.from({ length: 3000 }, (_, i) => ({
            index_key: i,
            schema_version: 0,
            attributes: {
              id: `many-${i}`,
              input: {
                value: i < changedBelow ? `changed-${serial}-${i}` : `v-${i}`,
                type: 'string',
              },
              output: {
                value: i < changedBelow ? `changed-${serial}-${i}` : `v-${i}`,
                type: 'string',
              },
              triggers_replace: null,
            },
            sensitive_attributes: [],
            dependencies: ['terraform_data.r'],
          })),
        },
        ...(doc(serial, lineage, `big-${serial}`).resources as unknown[]),
      ],
    });
    const first = big(1, 0);
    expect((await call('POST', stateUrl(a, name), JSON.stringify(first))).status).toBe(200);
    expectServed(await call('GET', stateUrl(b, name)), first, 'first big commit, GET on B');

    // Change half of them: 1500 lifecycles closed and 1500 opened in one commit.
    const second = big(2, 1500);
    expect((await call('POST', stateUrl(b, name), JSON.stringify(second))).status).toBe(200);
    expectServed(await call('GET', stateUrl(a, name)), second, 'second big commit, GET on A');
    for (const kld of [a, b]) {
      expectServed(await call('GET', `${stateUrl(kld, name)}?serial=1`), first, 'serial 1');
      expectServed(await call('GET', `${stateUrl(kld, name)}?serial=2`), second, 'serial 2');
    }
    const [{ n }] = await t.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM current_resources WHERE state_name = $1',
      [name],
    );
    expect(n).toBe(3001);
  });

  it('sees locks, unlocks and deletes made on the other replica at once', async () => {
    const name = `team/replicas/lifecycle-${randomUUID().slice(0, 8)}`;
    const lineage = randomUUID();
    for (let round = 0; round < 10; round++) {
      const [x, y] = round % 2 === 0 ? [a, b] : [b, a];
      const d = doc(1, lineage, `life-${round}`);
      expect((await call('POST', stateUrl(x, name), JSON.stringify(d))).status).toBe(200);
      expectServed(await call('GET', stateUrl(y, name)), d, `round ${round} GET`);

      const holder = lockInfo(randomUUID());
      expect((await call('LOCK', stateUrl(x, name), JSON.stringify(holder))).status).toBe(200);
      const refused = await call('LOCK', stateUrl(y, name), JSON.stringify(lockInfo('other')));
      expect(refused.status).toBe(423);
      expect(JSON.parse(refused.text)).toEqual(holder);
      const blocked = await call('DELETE', stateUrl(y, name));
      expect(blocked.status).toBe(423);
      expect((await call('UNLOCK', stateUrl(y, name), JSON.stringify(holder))).status).toBe(200);

      expect((await call('DELETE', stateUrl(y, name))).status).toBe(200);
      const gone = await call('GET', stateUrl(x, name));
      expect(gone.status).toBe(404);
      expect(JSON.parse(gone.text)).toEqual({
        error: { code: 'STATE.NOT_FOUND', message: `no state named "${name}"` },
      });
    }
  });

  it('gives exactly one of 20 racing LOCKs (split across both) the lock, 100 rounds', async () => {
    const name = `team/race/${randomUUID().slice(0, 8)}`;
    const lineage = randomUUID();
    expect(
      (await call('POST', stateUrl(a, name), JSON.stringify(doc(1, lineage, 'race')))).status,
    ).toBe(200);
    const failures: string[] = [];
    for (let round = 0; round < 100; round++) {
      const infos = Array.from({ length: 20 }, (_, i) =>
        lockInfo(`r${round}-c${i}-${randomUUID()}`),
      );
      const answers = await Promise.all(
        infos.map((info, i) =>
          call('LOCK', stateUrl(i % 2 === 0 ? a : b, name), JSON.stringify(info)),
        ),
      );
      const winners = answers.flatMap((r, i) => (r.status === 200 ? [infos[i]] : []));
      if (winners.length !== 1) {
        failures.push(
          `round ${round}: ${winners.length} winners; statuses ${answers.map((r) => r.status).join(',')}`,
        );
        // Release whatever is held so the next round starts clean.
        await call('UNLOCK', stateUrl(a, name), '');
        continue;
      }
      const [winner] = winners;
      for (const [i, r] of answers.entries()) {
        if (infos[i] === winner) continue;
        if (r.status !== 423) {
          failures.push(`round ${round} racer ${i}: ${r.status} ${r.text.slice(0, 200)}`);
          continue;
        }
        let body: unknown;
        try {
          body = JSON.parse(r.text);
        } catch {
          body = r.text;
        }
        if (!isDeepStrictEqual(body, winner)) {
          failures.push(`round ${round} racer ${i}: 423 names ${r.text.slice(0, 200)}`);
        }
      }
      // Release through the replica the winner did not use, half of the time.
      const via = round % 2 === 0 ? b : a;
      const released = await call('UNLOCK', stateUrl(via, name), JSON.stringify(winner));
      if (released.status !== 200) failures.push(`round ${round} unlock: ${released.status}`);
    }
    expect(failures).toEqual([]);

    // The log agrees: 100 acquisitions, 100 releases, none forced.
    const events = await t.db.query<{ type: string; forced: boolean | null }>(
      `SELECT type, (data->>'forced')::boolean AS forced FROM kl_events
        WHERE stream_id = $1 AND type IN ('LockAcquired', 'LockReleased') ORDER BY stream_revision`,
      [`state-${name}`],
    );
    expect(events.filter((e) => e.type === 'LockAcquired')).toHaveLength(100);
    expect(events.filter((e) => e.type === 'LockReleased' && e.forced === false)).toHaveLength(100);
    // Strictly alternating: never two acquisitions without a release between them.
    expect(events.every((e, i) => e.type === (i % 2 === 0 ? 'LockAcquired' : 'LockReleased'))).toBe(
      true,
    );
    const locks = await t.db.query(
      'SELECT l.* FROM state_locks l JOIN states s USING (state_id) WHERE s.name = $1',
      [name],
    );
    expect(locks).toEqual([]);
  });

  it('accepts every one of 20 racing unlocked POSTs (split across both) as a version', async () => {
    // Terraform with -lock=false sends whole documents without a lock: none of
    // them depends on what another wrote, so contention alone is no reason to
    // refuse one. (Before a3738bf the aggregate store gave up after 5
    // optimistic attempts and losers got 409 EVENTS.WRONG_EXPECTED_REVISION.)
    const name = `team/commit-race/${randomUUID().slice(0, 8)}`;
    const lineage = randomUUID();
    const refused: string[] = [];
    let accepted = 0;
    for (let round = 0; round < 5; round++) {
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          call(
            'POST',
            stateUrl(i % 2 === 0 ? a : b, name),
            JSON.stringify(doc(round * 20 + i + 1, lineage, `c${round}-${i}`)),
          ),
        ),
      );
      for (const r of answers) {
        if (r.status === 200) accepted++;
        else refused.push(`round ${round}: ${r.status} ${r.text.slice(0, 160)}`);
      }
    }
    // Whatever the outcome, the versions are exactly the accepted POSTs and
    // both replicas serve the newest of them.
    const versions = await t.db.query<{ version: number; serial: number }>(
      `SELECT v.version, v.serial::int AS serial FROM state_versions v JOIN states s USING (state_id)
        WHERE s.name = $1 AND s.deleted_at IS NULL ORDER BY v.version`,
      [name],
    );
    expect(versions.map((v) => v.version)).toEqual(versions.map((_, i) => i + 1));
    expect(versions).toHaveLength(accepted);
    const newest = versions[versions.length - 1];
    for (const kld of [a, b]) {
      const r = await call('GET', stateUrl(kld, name));
      expect((JSON.parse(r.text) as { serial: number }).serial).toBe(newest.serial);
    }
    expect(refused).toEqual([]);
  });

  it('accepts every one of 20 racing unlocked POSTs of 150 changed instances each (split across both)', async () => {
    // Each POST changes every instance: 150 lifecycles closed and 150 opened,
    // enough for the lifecycles to be written while the append is (one
    // connection more per commit, the projector's lock taken beside it). The
    // racing commands' catch-ups, on both replicas, must neither hang nor
    // skip nor double a lifecycle.
    const name = `team/bulk-race/${randomUUID().slice(0, 8)}`;
    const lineage = randomUUID();
    const bulk = (serial: number, tag: string) => ({
      ...doc(serial, lineage, tag),
      resources: [
        {
          mode: 'managed',
          type: 'terraform_data',
          name: 'many',
          provider: 'provider["terraform.io/builtin/terraform"]',
          instances: Array.from({ length: 150 }, (_, i) => ({
            index_key: i,
            schema_version: 0,
            attributes: { id: `many-${i}`, input: { value: `${tag}-${i}`, type: 'string' } },
            sensitive_attributes: [],
          })),
        },
      ],
    });
    const refused: string[] = [];
    const sent = new Map<number, ReturnType<typeof bulk>>();
    for (let round = 0; round < 2; round++) {
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) => {
          const serial = round * 20 + i + 1;
          const body = bulk(serial, `b${serial}`);
          sent.set(serial, body);
          return call('POST', stateUrl(i % 2 === 0 ? a : b, name), JSON.stringify(body));
        }),
      );
      for (const r of answers) {
        if (r.status !== 200) refused.push(`round ${round}: ${r.status} ${r.text.slice(0, 160)}`);
      }
    }
    expect(refused).toEqual([]);
    const versions = await t.db.query<{ version: number; serial: number }>(
      `SELECT v.version, v.serial::int AS serial FROM state_versions v JOIN states s USING (state_id)
        WHERE s.name = $1 AND s.deleted_at IS NULL ORDER BY v.version`,
      [name],
    );
    expect(versions.map((v) => v.version)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    // Every version's lifecycles, once each: 150 opened per version, all but
    // the newest's closed by the next.
    const rows = await t.db.query<{ version: number; opened: number; closed: number }>(
      `SELECT r.create_version AS version, count(*)::int AS opened,
              count(r.delete_version)::int AS closed
         FROM resources r JOIN states s USING (state_id)
        WHERE s.name = $1 AND s.deleted_at IS NULL GROUP BY 1 ORDER BY 1`,
      [name],
    );
    expect(rows).toEqual(
      versions.map((v, i) => ({ version: v.version, opened: 150, closed: i < 39 ? 150 : 0 })),
    );
    const newest = versions[versions.length - 1];
    for (const kld of [a, b]) {
      expectServed(await call('GET', stateUrl(kld, name)), sent.get(newest.serial), 'newest');
    }
  });
});
