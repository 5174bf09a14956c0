import { createHash, webcrypto } from 'node:crypto';
import { LayeredMap } from '../src/domain/shared/layered-map';
import { DocumentTextMemo } from '../src/application/state/document-text-memo';
import { InstanceHashMemo } from '../src/application/state/instance-hash-memo';
import {
  buildDocument,
  ChunkNames,
  diffInstances,
  documentChunks,
  documentMeta,
  FlatInstance,
  flattenInstances,
  instanceDigest,
  InstanceEncoding,
  InstanceObjectV4,
  instanceObjectText,
} from '../src/domain/terraform';
import { utf8Text } from '../src/infrastructure/http/read-body';

const decode = (body: Buffer) => utf8Text(body, 'STATE.INVALID', 'state');
import { fromSnapshot, toSnapshot } from '../src/domain/state/state.snapshot';
import { generateBigState } from './support/big-state-generator';
import { SyntheticState } from './support/state-generator';
import { formatInt } from './support/stats';

/**
 * In-process CPU cost of each step a delta POST takes in kld before the
 * database: the body's checksum, its UTF-8 decode, the reusing parse, the
 * hash memo, the decider's diff, the raw-state projector's re-chunking.
 * CPU time (process.cpuUsage), min and median over the versions: a figure
 * that load on a shared machine distorts far less than wall clock. What is
 * not here: HTTP, the event store's append, the other projectors, pg.
 *
 *   npm run build && node dist/bench/commit-path.js
 *   KL_BENCH_INSTANCES=20000 KL_BENCH_DELTA_VERSIONS=30 KL_BENCH_CHANGED=1
 *
 * Then the same steps for a first commit with nothing reused (firstCommitFloor),
 * of the same state or, with KL_BENCH_STATE=big, of the ladder's big-state example.
 */
const INSTANCES = Number(process.env.KL_BENCH_INSTANCES ?? 20_000);
const VERSIONS = Number(process.env.KL_BENCH_DELTA_VERSIONS ?? 30);
const CHANGED = Number(process.env.KL_BENCH_CHANGED ?? 1);

function cpuMs(run: () => void): number {
  const before = process.cpuUsage();
  run();
  const d = process.cpuUsage(before);
  return (d.user + d.system) / 1000;
}

async function main(): Promise<void> {
  const state = new SyntheticState({ instances: INSTANCES });
  const texts = new DocumentTextMemo();
  const hashes = new InstanceHashMemo();
  const encoded = new WeakMap<InstanceObjectV4, { bytes: Buffer; digest: Buffer }>();
  const encodedOf = (i: InstanceObjectV4) => {
    let e = encoded.get(i);
    if (e === undefined) {
      const bytes = Buffer.from(instanceObjectText(i), 'utf8');
      encoded.set(i, (e = { bytes, digest: instanceDigest(bytes) }));
    }
    return e;
  };
  const encoding: InstanceEncoding = {
    bytes: (i) => encodedOf(i).bytes,
    digest: (i) => encodedOf(i).digest,
  };
  const names = new ChunkNames();
  let current = LayeredMap.of<string, string>();
  const steps: Record<string, number[]> = {};
  const add = (name: string, ms: number) => (steps[name] ??= []).push(ms);

  for (let v = 0; v <= VERSIONS; v++) {
    if (v > 0) for (let c = 0; c < CHANGED; c++) state.changeOne((v * CHANGED + c) * 7919);
    const body = Buffer.from(state.text());
    const keep = v > 0; // version 0 is the full POST that fills the memos
    const t = (name: string, run: () => void) => {
      const ms = cpuMs(run);
      if (keep) add(name, ms);
    };
    await webcrypto.subtle.digest('SHA-256', body); // warm
    t('sha256 (createHash)', () => createHash('sha256').update(body).digest('hex'));
    let doc = null as unknown as ReturnType<DocumentTextMemo['parse']>;
    t('receive: reusing parse of the body', () => (doc = texts.parse('s', body, decode)));
    let flat = null as unknown as ReturnType<typeof flattenInstances>;
    t('flatten + hash memo', () => {
      const memo = hashes.open('s');
      flat = flattenInstances(doc, memo.hash, memo.known);
      memo.done(flat);
    });
    let opened: FlatInstance[] = [];
    t('decider diff', () => {
      opened = diffInstances(current, flat).opened;
      documentMeta(doc);
    });
    t('evolve (copy of the instance map)', () => {
      // What evolve does with the instance map: a copy, then the commit's opens.
      current = current.copy();
      for (const i of opened) current.set(i.address, i.hash);
    });
    // Every chunk hashed (as before wave 8) and, interleaved, the unchanged
    // chunks named from the last version (the projector's way); one total.
    let rebuilt: string[] = [];
    t('(peer) re-chunking, every chunk hashed', () => {
      rebuilt = documentChunks(buildDocument(documentMeta(doc), flat), encoding).map((c) => c.id);
    });
    let named: string[] = [];
    t('projector: buildDocument + documentChunks', () => {
      named = documentChunks(buildDocument(documentMeta(doc), flat), encoding, names).map(
        (c) => c.id,
      );
    });
    if (named.join() !== rebuilt.join()) throw new Error(`v${v}: named chunk ids differ`);
  }
  console.log(
    `${formatInt(INSTANCES)} instances, ${CHANGED} changed per version, ${VERSIONS} versions; CPU ms per step`,
  );
  let minSum = 0;
  let medSum = 0;
  for (const [name, ms] of Object.entries(steps)) {
    const sorted = [...ms].sort((a, b) => a - b);
    const med = sorted[Math.floor(sorted.length / 2)];
    if (!name.startsWith('(peer)')) {
      minSum += sorted[0];
      medSum += med;
    }
    console.log(
      `  ${name.padEnd(45)} min ${sorted[0].toFixed(1).padStart(7)}  median ${med.toFixed(1).padStart(7)}`,
    );
  }
  console.log(
    `  ${'total'.padEnd(45)} min ${minSum.toFixed(1).padStart(7)}  median ${medSum.toFixed(1).padStart(7)}`,
  );
  snapshotCost([...current]);
  firstCommitFloor(
    process.env.KL_BENCH_STATE === 'big'
      ? generateBigState({ size: Math.round((INSTANCES - 8) / 2) }).text
      : state.text(),
  );
}

/**
 * kld's CPU for a first commit before the database, with nothing reused:
 * what even a POST that answered once its log is written would spend
 * (issue 14's `state push -force`, wave 22). Fresh memos each round; the
 * events' text is JSON of each LifecycleOpened's data, as the log stores it.
 */
function firstCommitFloor(text: string): void {
  const body = Buffer.from(text);
  const steps: Record<string, number[]> = {};
  const t = (name: string, run: () => void) => (steps[name] ??= []).push(cpuMs(run));
  for (let round = 0; round < 5; round++) {
    t('(reference) JSON.parse of the body', () => JSON.parse(body.toString('utf8')));
    t('sha256 of the body', () => createHash('sha256').update(body).digest('hex'));
    let doc = null as unknown as ReturnType<DocumentTextMemo['parse']>;
    t('decode + parse + validate', () => (doc = new DocumentTextMemo().parse('s', body, decode)));
    let flat = null as unknown as ReturnType<typeof flattenInstances>;
    t('flatten + canonical hashes', () => {
      const memo = new InstanceHashMemo().open('s');
      flat = flattenInstances(doc, memo.hash, memo.known);
    });
    let opened: FlatInstance[] = [];
    t('decider diff (all opened)', () => {
      opened = diffInstances(LayeredMap.of<string, string>(), flat).opened;
    });
    t("the events' JSON text", () => {
      for (const i of opened) {
        JSON.stringify({
          stateId: 's',
          version: 1,
          serial: 1,
          address: i.address,
          hash: i.hash,
          resource: i.resource,
          instance: i.instance,
        });
      }
    });
  }
  console.log(
    `\nfirst commit, nothing reused (${(body.length / 2 ** 20).toFixed(1)} MiB), CPU ms, 5 rounds`,
  );
  let min = 0;
  for (const [name, ms] of Object.entries(steps)) {
    const sorted = [...ms].sort((a, b) => a - b);
    if (!name.startsWith('(')) min += sorted[0];
    console.log(
      `  ${name.padEnd(45)} min ${sorted[0].toFixed(1).padStart(7)}  median ${sorted[2].toFixed(1).padStart(7)}`,
    );
  }
  console.log(`  ${'sum of the minima'.padEnd(45)} min ${min.toFixed(1).padStart(7)}`);
}

/**
 * What writing the State aggregate's snapshot costs kld (toSnapshot and the
 * JSON the driver sends): until wave 8 it ran inside a command every 200
 * events, about every 17 commits of 1–10 changes at 20k; now after the
 * command, every as many events as the state has addresses.
 */
function snapshotCost(instances: [string, string][]): void {
  const state = fromSnapshot({
    status: 'active',
    stateId: 's',
    name: 's',
    locks: [],
    reservations: [],
    version: 1,
    serial: 1,
    lineage: 'l',
    instances,
    outputs: [],
    changedIn: instances.map(([a]) => [a, 1]),
    resources: instances.map(([a]) => [a, '{}', 1]),
    meta: null,
    head: null,
  });
  const ms: number[] = [];
  let bytes = 0;
  for (let i = 0; i < 5; i++)
    ms.push(cpuMs(() => (bytes = JSON.stringify(toSnapshot(state)).length)));
  console.log(
    `  ${'(once per snapshot) State snapshot: toSnapshot + JSON'.padEnd(45)} min ${Math.min(...ms)
      .toFixed(1)
      .padStart(7)}  (${(bytes / 1048576).toFixed(1)} MiB of JSON)`,
  );
}

void main();
