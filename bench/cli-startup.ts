import { execFile } from 'node:child_process';
import * as http from 'node:http';
import { AddressInfo } from 'node:net';
import * as path from 'node:path';
import { printMachine, printTable } from './support/report';
import { distribution, formatMs } from './support/stats';

/**
 * `kl` start-up, wall clock of the whole process, against bare `node -e 0`
 * in the same run (interleaved, so load on the machine hits both alike).
 * `kl states` talks to a stub server in this process answering one state, so
 * the figure is kl's own cost, not kld's.
 *
 *   npm run build && node dist/bench/cli-startup.js
 *
 *   KL_BENCH_REPS=15   runs of each command
 *   KL_BENCH_KL=path   another build of kl.js to compare (e.g. an older checkout's dist)
 */

const REPS = Number(process.env.KL_BENCH_REPS ?? 15);
const TARGET_MS = 200;
const ROOT = path.resolve(__dirname, '../..');
const KL = process.env.KL_BENCH_KL ?? path.join(ROOT, 'dist/src/cli/kl.js');

const ONE_STATE = {
  states: [
    {
      stateId: '00000000-0000-4000-8000-000000000001',
      name: 'team/prod/network',
      createdAt: '2026-01-01T00:00:00.000Z',
      updatedAt: '2026-01-01T00:00:00.000Z',
      version: 3,
      serial: 3,
      lineage: '00000000-0000-4000-8000-000000000002',
      terraformVersion: '1.11.4',
      instanceCount: 12,
      resourceCount: 7,
      lock: null,
    },
  ],
};

function run(args: string[]): Promise<number> {
  const started = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    execFile(process.execPath, args, { env: { ...process.env, KL_TOKEN: '' } }, (err) => {
      if (err) reject(err);
      else resolve(Number(process.hrtime.bigint() - started) / 1e6);
    });
  });
}

async function main(): Promise<void> {
  const stub = http.createServer((req, res) => {
    const found = req.url === '/v1/api/states';
    res.writeHead(found ? 200 : 404, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify(found ? ONE_STATE : { error: { code: 'X', message: 'not found' } }));
  });
  await new Promise<void>((resolve) => stub.listen(0, '127.0.0.1', resolve));
  const server = `http://127.0.0.1:${(stub.address() as AddressInfo).port}`;
  const cases: { label: string; args: string[] }[] = [
    { label: 'node -e 0', args: ['-e', '0'] },
    { label: 'kl --help', args: [KL, '--help'] },
    { label: 'kl states (stub server)', args: [KL, '--server', server, 'states'] },
    { label: 'kl refresh --help', args: [KL, 'refresh', '--help'] },
  ];
  try {
    console.log(`kl start-up, ${REPS} runs each, interleaved: ${KL}`);
    printMachine();
    const samples = cases.map(() => [] as number[]);
    for (let rep = 0; rep < REPS; rep++) {
      for (const [i, c] of cases.entries()) samples[i].push(await run(c.args));
    }
    const base = distribution(samples[0]).p50;
    printTable(
      ['command', 'p50 ms', 'min ms', 'max ms', 'p50 − node', 'goal'],
      cases.map((c, i) => {
        const d = distribution(samples[i]);
        return [
          c.label,
          formatMs(d.p50),
          formatMs(d.min),
          formatMs(d.max),
          i === 0 ? '' : formatMs(d.p50 - base),
          i === 0 ? '' : `≤ ${TARGET_MS} ms wall`,
        ];
      }),
    );
    printMachine('after');
  } finally {
    stub.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
