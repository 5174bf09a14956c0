import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { onPath } from '../test/support/terraform-aws';
import { openBenchDatabase } from './support/bench-database';
import { httpBackend, killAll, mustRun, startKld, Timed } from './support/refresh-processes';
import { printMachine, printTable } from './support/report';
import { formatMs, median, verdict } from './support/stats';

/**
 * Parallel apply (ADR 0007): two `kl apply` runs that each replace one slow
 * resource (`terraform_data` + `local-exec sleep`) of the same state, which
 * also holds OTHER (2,000) unrelated instances. Timed as child processes,
 * wall clock:
 *
 *   peer         one plain `terraform apply` replacing slow_a (whole-state lock)
 *   one          one `kl apply` replacing slow_a
 *   sequential   kl apply slow_a, then kl apply slow_b
 *   parallel     both at once
 *
 * Target: parallel ≤ 1.15 × one. Every kl apply reports (`--format json`)
 * its acquire latency, slice build time (trunk fetch, slice, private
 * directory), terraform time and commit latency. Prints figures; never
 * fails on a miss.
 *
 *   npm run bench:parallel-apply
 *
 * Environment: KL_BENCH_DATABASE_URL (else an embedded PostgreSQL),
 * KL_BENCH_OTHER=2000, KL_BENCH_SLEEP=10 (seconds per replacement),
 * KL_BENCH_REPS=1.
 */

const OTHER = intEnv('KL_BENCH_OTHER', 2_000);
const SLEEP = intEnv('KL_BENCH_SLEEP', 10);
const REPS = intEnv('KL_BENCH_REPS', 1);
const TARGET = 1.15;
const STATE = 'bench/parallel-apply';
const ROOT = path.resolve(__dirname, '../..');
const KLD = path.join(ROOT, 'dist/src/kld.js');
const KL = path.join(ROOT, 'dist/src/cli/kl.js');

function intEnv(name: string, fallback: number): number {
  const v = process.env[name];
  if (v === undefined) return fallback;
  if (!/^\d+$/.test(v)) throw new Error(`${name} must be a whole number, got ${v}`);
  return Number(v);
}

interface ApplyFigures {
  wall_ms: number;
  acquire_ms: number;
  slice_ms: number;
  terraform_ms: number;
  commit_ms: number;
}

const slowTf = (name: string) => `variable "${name}_version" {
  type    = string
  default = "v1"
}

resource "terraform_data" "${name}" {
  input            = "\${var.${name}_version}"
  triggers_replace = [var.${name}_version]
  provisioner "local-exec" {
    command = "sleep \${var.sleep_seconds}"
  }
}
`;

async function main(): Promise<void> {
  const terraform = onPath('terraform', 'terraform 1.11');
  const logger = pino({ level: 'warn' });
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-bench-parallel-'));
  const db = await openBenchDatabase(logger);
  let stopKld: (() => Promise<void>) | undefined;
  const cleanup = async () => {
    await stopKld?.();
    await killAll();
    await db.close();
    fs.rmSync(work, { recursive: true, force: true });
  };
  process.once('SIGINT', () => void cleanup().then(() => process.exit(130)));
  try {
    const kld = await startKld(KLD, db.url, path.join(work, 'kld'));
    stopKld = kld.stop;
    const dir = path.join(work, 'cfg');
    fs.mkdirSync(dir);
    fs.writeFileSync(
      path.join(dir, 'backend.tf'),
      `terraform {\n${httpBackend(kld.url, STATE)}}\n`,
    );
    fs.writeFileSync(
      path.join(dir, 'main.tf'),
      `variable "sleep_seconds" {\n  type    = number\n  default = ${SLEEP}\n}\n\n` +
        `resource "terraform_data" "other" {\n  count = ${OTHER}\n  input = { n = count.index, blob = "payload-\${count.index}-abcdefghijklmnopqrstuvwxyz" }\n}\n`,
    );
    fs.writeFileSync(path.join(dir, 'slow_a.tf'), slowTf('slow_a'));
    fs.writeFileSync(path.join(dir, 'slow_b.tf'), slowTf('slow_b'));
    const tfrc = path.join(work, 'terraformrc');
    fs.writeFileSync(tfrc, 'disable_checkpoint = true\n');
    const env: NodeJS.ProcessEnv = {
      ...Object.fromEntries(
        Object.entries(process.env).filter(([k]) => !k.startsWith('TF_') && !k.startsWith('KL_')),
      ),
      TF_CLI_CONFIG_FILE: tfrc,
      CHECKPOINT_DISABLE: '1',
      TF_IN_AUTOMATION: '1',
      KL_TERRAFORM: terraform,
    };
    const opts = { cwd: dir, env, timeoutMs: 900_000 };
    const setVar = (name: string, value: string) =>
      fs.writeFileSync(path.join(dir, `${name}.auto.tfvars`), `${name} = "${value}"\n`);
    let n = 0;
    const fresh = () => `v${++n}`;

    printMachine();
    console.log(
      `  state:    ${OTHER} other instances + 2 slow ones (sleep ${SLEEP} s each), ${REPS} rep(s)`,
    );
    console.log(`  database: ${db.origin}`);
    await mustRun('terraform init', terraform, ['init', '-input=false', '-no-color'], opts);
    const boot = await mustRun(
      'bootstrap apply',
      terraform,
      ['apply', '-auto-approve', '-input=false', '-no-color'],
      opts,
    );
    console.log(`  bootstrap terraform apply (${OTHER + 2} creates): ${formatMs(boot.ms)} ms`);

    const plan = async (name: string, out: string): Promise<Timed> => {
      setVar(`${name}_version`, fresh());
      return mustRun(
        `kl plan ${name}`,
        process.execPath,
        [KL, 'plan', '-f', `${name}.tf`, '-o', out],
        opts,
      );
    };
    const apply = async (file: string): Promise<ApplyFigures & { process_ms: number }> => {
      const r = await mustRun(
        `kl apply ${file}`,
        process.execPath,
        [KL, '--format', 'json', 'apply', file],
        opts,
      );
      const outcome = JSON.parse(r.stdout.trim().split('\n').pop()!) as ApplyFigures & {
        status: string;
      };
      if (outcome.status !== 'committed')
        throw new Error(`kl apply ${file}: ${r.stdout}${r.stderr}`);
      return { ...outcome, process_ms: r.ms };
    };

    const rows: string[][] = [];
    const figures: { label: string; f: ApplyFigures }[] = [];
    const walls = {
      peer: [] as number[],
      one: [] as number[],
      sequential: [] as number[],
      parallel: [] as number[],
    };
    const plans: number[] = [];
    for (let rep = 0; rep < REPS; rep++) {
      setVar('slow_a_version', fresh());
      const peer = await mustRun(
        'plain terraform apply',
        terraform,
        ['apply', '-auto-approve', '-input=false', '-no-color'],
        opts,
      );
      walls.peer.push(peer.ms);

      plans.push((await plan('slow_a', 'one.json')).ms);
      const one = await apply('one.json');
      // Timed from outside like sequential and parallel: node's start-up included.
      walls.one.push(one.process_ms);
      figures.push({ label: 'one', f: one });

      plans.push((await plan('slow_a', 'a.json')).ms, (await plan('slow_b', 'b.json')).ms);
      const seqStart = Date.now();
      figures.push({ label: 'sequential a', f: await apply('a.json') });
      figures.push({ label: 'sequential b', f: await apply('b.json') });
      walls.sequential.push(Date.now() - seqStart);

      plans.push((await plan('slow_a', 'a.json')).ms, (await plan('slow_b', 'b.json')).ms);
      const parStart = Date.now();
      const [pa, pb] = await Promise.all([apply('a.json'), apply('b.json')]);
      walls.parallel.push(Date.now() - parStart);
      figures.push({ label: 'parallel a', f: pa }, { label: 'parallel b', f: pb });
    }
    console.log('\nwall clock (median of reps):');
    for (const [k, v] of Object.entries(walls)) rows.push([k, formatMs(median(v))]);
    printTable(['run', 'wall ms'], rows);
    const ratio = median(walls.parallel) / median(walls.one);
    console.log(
      `\nparallel / one kl apply = ${ratio.toFixed(2)} (target ≤ ${TARGET}) ${verdict(ratio <= TARGET)}` +
        `\nsequential / parallel = ${(median(walls.sequential) / median(walls.parallel)).toFixed(2)}` +
        `\none kl apply / one plain terraform apply = ${(median(walls.one) / median(walls.peer)).toFixed(2)}` +
        `\nkl plan -f (median): ${formatMs(median(plans))} ms`,
    );
    console.log('\nper kl apply:');
    printTable(
      ['run', 'wall ms', 'acquire ms', 'slice build ms', 'terraform ms', 'commit ms'],
      figures.map(({ label, f }) => [
        label,
        formatMs(f.wall_ms),
        formatMs(f.acquire_ms),
        formatMs(f.slice_ms),
        formatMs(f.terraform_ms),
        formatMs(f.commit_ms),
      ]),
    );
  } finally {
    await cleanup();
  }
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
