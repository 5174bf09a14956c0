import { printMachine, printRecords } from './support/report';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import {
  awsVersionIn,
  findTerraformMirror,
  motoEndpointEnv,
  Moto,
  onPath,
  processesUnder,
  startMoto,
  writeMirrorCliConfig,
} from '../test/support/terraform-aws';
import { openBenchDatabase } from './support/bench-database';
import { KltestWorkspace, kltestMirror, prepareKltest } from './support/refresh-kltest';
import {
  httpBackend,
  Kld,
  killAll,
  mustRun,
  sql,
  startKld,
  Timed,
} from './support/refresh-processes';
import {
  ConcurrencyProbe,
  probeReadConcurrency,
  profileRefresh,
  RefreshProfile,
} from './support/refresh-profile';
import { formatInt, formatMs, median, verdict } from './support/stats';
import {
  DatabaseCpuMeter,
  postmasterOf,
  processCpuMs,
  reapedChildrenCpuMs,
} from './support/process-cpu';
import { poolSize } from '../src/application/refresh/refresh-group';

/**
 * `kl refresh` against `terraform plan -refresh-only` on the same state, the
 * same provider binary and the same remote objects, as ADR 0005 promises
 * ("order of magnitude faster is the goal"). Prints figures and targets;
 * never fails on a miss.
 *
 *   npm run build && node dist/bench/refresh.js
 *
 *   (a) N aws_ssm_parameter (default 200) applied by terraform into moto
 *       through kld's http backend; the real AWS provider (protocol 5).
 *   (b) N kltest_item (default 5,000) of the repo's TypeScript test provider
 *       (protocol 6); the state is generated from a terraform-written template
 *       (see bench/support/refresh-kltest.ts for how and why).
 *
 * Both sides are timed as child processes, wall clock, in alternation:
 * terraform, `kl refresh` with the other pool (`--pool 1`, one provider
 * process per provider configuration as terraform runs, or `--pool 2` when
 * the default is 1), `kl refresh` with its pool (default: one provider process
 * per CPU less one, at most 4; KL_BENCH_POOL sets it; 1 on 2 CPUs). The first
 * `kl refresh` of a scenario meets an empty schema cache (it calls GetSchema
 * and stores it in kld); later runs are served from the cache, as every
 * refresh after the first with a provider version is. Then refreshes run in
 * this process with a stopwatch on every server call and provider RPC and
 * the CPU of kl, the provider processes and kld, with a pool of 1 and with
 * the pool, to say where the time goes; CPU time is what load distorts least.
 *
 * Environment:
 *   KL_BENCH_DATABASE_URL   a PostgreSQL server URL (else an embedded one)
 *   KL_TF_MIRROR            the Terraform filesystem mirror holding hashicorp/aws
 *                           (else found as the e2e tests find it)
 *   KL_BENCH_SSM=200  KL_BENCH_KLTEST=5000  KL_BENCH_KL_REPS=3  KL_BENCH_TF_REPS=2
 *   KL_BENCH_POOL       kl refresh --pool for the "ours" runs (default: kl's own default)
 *   KL_BENCH_SKIP_AWS=1 / KL_BENCH_SKIP_KLTEST=1
 *   KL_BENCH_TF_REPS=0  no terraform runs (kl's figures only, to iterate on kl)
 *   KL_BENCH_BASE_KL    another build's dist/src/cli/kl.js (e.g. main's, in its own
 *                       worktree): after the comparison, that kl and ours refresh the
 *                       same state in alternation, KL_BENCH_AB_ROUNDS times (default 5),
 *                       with their default pool and with --pool 1, and the bench prints
 *                       wall and CPU (kl with its provider processes, kld, PostgreSQL)
 *                       min and median per build: a before/after in one run
 *   KL_BENCH_KL_NODE_ARGS  node options for our kl's runs, e.g. "--cpu-prof --cpu-prof-dir=DIR"
 *   KL_BENCH_KL_ARGS    more `kl refresh` options for our kl's runs (not the base's), e.g.
 *                       "--parallelism 32": with KL_BENCH_BASE_KL set to this build's own kl,
 *                       the before/after compares an option against the default
 */

const TARGET_AWS = 5;
const TARGET_KLTEST = 10;
const SSM = intEnv('KL_BENCH_SSM', 200);
const KLTEST = intEnv('KL_BENCH_KLTEST', 5_000);
const KL_REPS = intEnv('KL_BENCH_KL_REPS', 3);
const TF_REPS = intEnv('KL_BENCH_TF_REPS', 2, 0);
const BASE_KL = process.env.KL_BENCH_BASE_KL
  ? path.resolve(process.env.KL_BENCH_BASE_KL)
  : undefined;
const AB_ROUNDS = intEnv('KL_BENCH_AB_ROUNDS', 5);
/** Node options for our kl only, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof" (NODE_OPTIONS refuses --cpu-prof). */
const KL_NODE_ARGS = (process.env.KL_BENCH_KL_NODE_ARGS ?? '').split(' ').filter(Boolean);
const KL_ARGS = (process.env.KL_BENCH_KL_ARGS ?? '').split(' ').filter(Boolean);
const POOL = process.env.KL_BENCH_POOL ? intEnv('KL_BENCH_POOL', 1) : undefined;
const SKIP_AWS = process.env.KL_BENCH_SKIP_AWS === '1';
const SKIP_KLTEST = process.env.KL_BENCH_SKIP_KLTEST === '1';
const COMMAND_TIMEOUT_MS = 600_000;

const ROOT = path.resolve(__dirname, '../..');
const KLD = path.join(ROOT, 'dist/src/kld.js');
const KL = path.join(ROOT, 'dist/src/cli/kl.js');

/** Everything to undo, newest first; run once, on success, error or signal. */
const undo: { label: string; run: () => Promise<void> | void }[] = [];
let cleaning: Promise<void> | undefined;
let tmpRoot = '';
/** kld's database on the embedded server, for PostgreSQL's CPU; unset for an external server. */
let postgres: { postmaster: number; database: string } | undefined;

function cleanup(): Promise<void> {
  return (cleaning ??= (async () => {
    await killAll();
    // A provider whose terraform or kl died anyway; found by its working directory.
    if (tmpRoot) {
      for (const pid of processesUnder(tmpRoot, 'terraform-provider-')) {
        process.stderr.write(`cleanup: killing provider process ${pid}\n`);
        process.kill(pid, 'SIGKILL');
      }
    }
    while (undo.length) {
      const step = undo.pop()!;
      try {
        await step.run();
      } catch (err) {
        process.stderr.write(`cleanup (${step.label}) failed: ${String(err)}\n`);
      }
    }
  })());
}

interface Row {
  measurement: string;
  ours: string;
  peer: string;
  ratio: string;
  target: string;
  result: string;
}

interface Comparison {
  label: string;
  /** Provider processes `kl refresh` ran its one group on (the pool). */
  pool: number;
  /** Wall ms of each `kl refresh` with its pool; the first met an empty schema cache. */
  kl: Timed[];
  /** The other pool size timed for comparison: 1, or 2 when `pool` is 1. */
  otherPool: number;
  /** Wall ms of each `kl refresh --pool <otherPool>` (schema cached). */
  klOther: Timed[];
  klOut: string[];
  terraform: Timed[];
  profile: RefreshProfile;
  /** The same with one provider process. */
  otherProfile: RefreshProfile;
  /** The same, after emptying kld's schema cache: what a first refresh with a provider version pays. */
  coldProfile: RefreshProfile;
  probe: ConcurrencyProbe[];
  /** Before/after: KL_BENCH_BASE_KL's kl and ours in alternation (empty without it). */
  ab: AbRun[];
}

/** One `kl refresh` child process of the before/after rounds. */
interface AbRun {
  build: 'base' | 'ours';
  /** --pool, or undefined for the build's own default. */
  pool: number | undefined;
  wallMs: number;
  /** kl and the provider processes it waited for (reaped children's CPU). */
  klCpuMs: number;
  kldCpuMs: number;
  postgresCpuMs: number;
}

async function main(): Promise<void> {
  const started = Date.now();
  const onSignal = (signal: NodeJS.Signals) => {
    process.stderr.write(`\n${signal}: cleaning up\n`);
    void cleanup().finally(() => process.exit(signal === 'SIGINT' ? 130 : 143));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const logger = pino({ level: process.env.KL_LOG_LEVEL ?? 'warn' }, pino.destination(2));
  const rows: Row[] = [];
  const comparisons: Comparison[] = [];

  try {
    if (!fs.existsSync(KL) || !fs.existsSync(KLD)) {
      throw new Error('dist/ is missing kl or kld: run npm run build first');
    }
    onPath('terraform', 'terraform 1.11');
    tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-bench-refresh-'));
    undo.push({
      label: 'temp dir',
      run: () => fs.rmSync(tmpRoot, { recursive: true, force: true }),
    });

    const bench = await openBenchDatabase(logger);
    undo.push({ label: 'database', run: () => bench.close() });
    const kld = await startKld(KLD, bench.url, path.join(tmpRoot, 'kld'));
    undo.push({ label: 'kld', run: () => kld.stop() });
    // The embedded server's postmaster (its origin names the data directory); none for an external one.
    const dataDir = /data in (.+)$/.exec(bench.origin)?.[1];
    const postmaster = dataDir ? postmasterOf(dataDir) : null;
    if (postmaster !== null) {
      postgres = { postmaster, database: new URL(bench.url).pathname.slice(1) };
    }
    printHeader(bench.origin, kld);

    const baseEnv = cleanEnv();
    if (!SKIP_AWS) {
      onPath('moto_server', 'moto_server for the AWS scenario');
      const mirror = findTerraformMirror();
      const moto = await startMoto();
      undo.push({ label: 'moto', run: () => moto.stop() });
      console.log(`moto:      pid ${moto.pid}, ${moto.endpoint}`);
      console.log(`AWS:       hashicorp/aws ${awsVersionIn(mirror)} from ${mirror}`);
      const c = await awsScenario(kld, moto, mirror, baseEnv);
      comparisons.push(c);
      rows.push(...rowsOf(c, TARGET_AWS));
      await moto.stop();
    }
    if (!SKIP_KLTEST) {
      const c = await kltestScenario(kld, baseEnv);
      comparisons.push(c);
      rows.push(...rowsOf(c, TARGET_KLTEST));
    }

    console.log();
    printRecords<keyof Row>(
      {
        measurement: 'measurement',
        ours: 'ours (kl refresh)',
        peer: 'peer (terraform)',
        ratio: 'ratio',
        target: 'target',
        result: 'result',
      },
      rows,
    );
    for (const c of comparisons) printProfile(c);
    await kld.stop();
    const leftovers = processesUnder(tmpRoot, 'terraform-provider-');
    console.log(
      `\nprovider processes left under ${tmpRoot}: ${leftovers.length === 0 ? 'none' : leftovers.join(', ')}`,
    );
    for (const pid of leftovers) process.kill(pid, 'SIGKILL');
    const load = os.loadavg();
    console.log(
      `load average after the run: ${load.map((l) => l.toFixed(2)).join(' ')}; ` +
        `total ${((Date.now() - started) / 1000).toFixed(0)} s`,
    );
  } finally {
    await cleanup();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

// ---------------------------------------------------------------------------
// scenarios

async function awsScenario(
  kld: Kld,
  moto: Moto,
  mirror: string,
  baseEnv: NodeJS.ProcessEnv,
): Promise<Comparison> {
  const state = 'bench/refresh-aws';
  const dir = path.join(tmpRoot, 'tf-aws');
  fs.mkdirSync(dir);
  const cliConfig = path.join(tmpRoot, 'terraformrc-aws');
  writeMirrorCliConfig(cliConfig, mirror);
  const env: NodeJS.ProcessEnv = {
    ...baseEnv,
    TF_CLI_CONFIG_FILE: cliConfig,
    AWS_ACCESS_KEY_ID: 'test',
    AWS_SECRET_ACCESS_KEY: 'test',
    AWS_EC2_METADATA_DISABLED: 'true',
  };
  const e = moto.endpoint;
  fs.writeFileSync(
    path.join(dir, 'main.tf'),
    `terraform {
  required_providers {
    aws = { source = "hashicorp/aws", version = ${JSON.stringify(awsVersionIn(mirror))} }
  }
${httpBackend(kld.url, state)}}

provider "aws" {
  access_key                  = "test"
  secret_key                  = "test"
  region                      = "us-east-1"
  skip_credentials_validation = true
  skip_requesting_account_id  = true
  skip_metadata_api_check     = true
}

resource "aws_ssm_parameter" "p" {
  count = ${SSM}
  name  = "/kl-bench/p/\${count.index}"
  type  = "String"
  value = "value-\${count.index}"
}
`,
  );
  // terraform reaches moto through AWS_ENDPOINT_URL, as it would reach AWS with no endpoints
  // block: provider 5.100 spends seconds of CPU validating such a block in every provider process
  // (about 10 s per plan here, wave 27), a cost no user refreshing against AWS pays.
  const tfEnv = { ...env, ...motoEndpointEnv(moto) };
  const tf = (args: string[], okCodes?: number[]) =>
    mustRun(`terraform ${args.join(' ')}`, 'terraform', [...args, '-input=false', '-no-color'], {
      cwd: dir,
      env: tfEnv,
      timeoutMs: COMMAND_TIMEOUT_MS,
      okCodes,
    });
  console.log(`\n(a) ${formatInt(SSM)} aws_ssm_parameter in moto, AWS provider (protocol 5)`);
  const init = await tf(['init']);
  const apply = await tf(['apply', '-auto-approve']);
  console.log(
    `  terraform init ${secs(init.ms)}, apply of ${formatInt(SSM)} (parallelism 10) ${secs(apply.ms)}`,
  );
  const config = path.join(tmpRoot, 'aws.json');
  fs.writeFileSync(
    config,
    JSON.stringify({
      access_key: { env: 'AWS_ACCESS_KEY_ID' },
      secret_key: { env: 'AWS_SECRET_ACCESS_KEY' },
      region: 'us-east-1',
      skip_credentials_validation: true,
      skip_requesting_account_id: true,
      skip_metadata_api_check: true,
      endpoints: [{ ssm: e, sts: e }],
    }),
  );
  await kl(dir, env, ['provider', 'configure', state, 'hashicorp/aws', '--from-json', config], kld);
  return compare(
    `${formatInt(SSM)} aws_ssm_parameter (moto)`,
    state,
    dir,
    env,
    kld,
    SSM,
    (okCodes) => tf(['plan', '-refresh-only', '-detailed-exitcode'], okCodes),
  );
}

async function kltestScenario(kld: Kld, baseEnv: NodeJS.ProcessEnv): Promise<Comparison> {
  const state = 'bench/refresh-kltest';
  const mirror = kltestMirror(tmpRoot, ROOT);
  const cliConfig = path.join(tmpRoot, 'terraformrc-kltest');
  writeMirrorCliConfig(cliConfig, mirror);
  console.log(`\n(b) ${formatInt(KLTEST)} kltest_item, TypeScript test provider (protocol 6)`);
  const ws: KltestWorkspace = await prepareKltest({
    root: tmpRoot,
    kldUrl: kld.url,
    state,
    instances: KLTEST,
    baseEnv,
    cliConfig,
  });
  console.log(
    `  template: terraform apply of 2 ${secs(ws.templateApplyMs)}; generated ${formatInt(KLTEST)} ` +
      `instances + object files in ${secs(ws.generateMs)}; POST of the ${mib(ws.stateBytes)} ` +
      `state to kld ${secs(ws.pushMs)}`,
  );
  const config = path.join(tmpRoot, 'kltest.json');
  fs.writeFileSync(config, JSON.stringify({ state_dir: { env: 'KLTEST_OBJECTS' } }));
  await kl(
    ws.dir,
    ws.env,
    ['provider', 'configure', state, 'kilolock/kltest', '--from-json', config],
    kld,
  );
  return compare(
    `${formatInt(KLTEST)} kltest_item`,
    state,
    ws.dir,
    ws.env,
    kld,
    KLTEST,
    (okCodes) =>
      mustRun(
        'terraform plan -refresh-only',
        'terraform',
        ['plan', '-refresh-only', '-detailed-exitcode', '-input=false', '-no-color'],
        { cwd: ws.dir, env: ws.env, timeoutMs: COMMAND_TIMEOUT_MS, okCodes },
      ),
  );
}

/**
 * kl refresh (cold schema cache), then terraform and kl in alternation, then
 * the profiled in-process refresh. Each kl refresh commits a version (that
 * is its job); terraform's plan writes nothing.
 */
async function compare(
  label: string,
  state: string,
  dir: string,
  env: NodeJS.ProcessEnv,
  kld: Kld,
  instances: number,
  terraformRefresh: (okCodes: number[]) => Promise<Timed>,
): Promise<Comparison> {
  const pool = poolSize(instances, POOL, os.cpus().length);
  // The pool not taken by default, timed alongside it: which is faster here is measured, not assumed.
  const otherPool = pool === 1 ? 2 : 1;
  const klRuns: Timed[] = [];
  const klOther: Timed[] = [];
  const klOut: string[] = [];
  const tfRuns: Timed[] = [];
  const klRefresh = async (poolArg: number | undefined) => {
    const args = [
      'refresh',
      state,
      ...(poolArg === undefined ? [] : ['--pool', String(poolArg)]),
      ...KL_ARGS,
    ];
    const r = await kl(dir, env, args, kld);
    const first = r.stdout.split('\n')[0];
    if (poolArg === otherPool) {
      klOther.push(r);
      console.log(`  kl refresh --pool ${otherPool} #${klOther.length}: ${secs(r.ms)}  ${first}`);
    } else {
      klRuns.push(r);
      klOut.push(first);
      console.log(`  kl refresh (pool ${pool}) #${klRuns.length}: ${secs(r.ms)}  ${first}`);
    }
  };
  await klRefresh(POOL);
  for (let i = 0; i < Math.max(TF_REPS, KL_REPS - 1); i++) {
    if (i < TF_REPS) {
      const r = await terraformRefresh([0, 2]);
      tfRuns.push(r);
      // Exit 2 with "No changes" happens: terraform compares the state it would write byte
      // for byte, and the AWS provider's sensitive paths come out in a varying order.
      const summary = /No changes\./.test(r.stdout)
        ? 'no drift shown'
        : /has changed|have changed/.test(r.stdout)
          ? 'drift shown'
          : 'see output';
      console.log(
        `  terraform plan -refresh-only #${tfRuns.length}: ${secs(r.ms)}  exit ${r.code} (${summary})`,
      );
    }
    if (i < KL_REPS - 1) {
      await klRefresh(otherPool);
      await klRefresh(POOL);
    }
  }
  const ab = BASE_KL ? await beforeAfter(state, dir, env, kld) : [];
  const profiled = (p: RefreshProfile, what: string) =>
    console.log(
      `  profiled in-process refresh (${what}): ${secs(p.wallMs)}  status=${p.report.status} ` +
        `checked=${p.report.checked} changed=${p.report.changed} failed=${p.report.failed}; CPU ` +
        `kl ${secs(p.cpu.kl)}, ${p.providerProcesses} provider process(es) ${secs(p.cpu.providers)}, ` +
        `kld ${secs(p.cpu.kld)}, PostgreSQL ${secs(p.cpu.postgres)}`,
    );
  const options = { cwd: dir, actor: 'bench@refresh', env, kldPid: kld.pid, postgres };
  const otherProfile = await profileRefresh(kld.url, state, { ...options, pool: otherPool });
  profiled(otherProfile, `pool ${otherPool}, schema cached`);
  const profile = await profileRefresh(kld.url, state, { ...options, pool });
  profiled(profile, `pool ${pool}, schema cached`);
  // A plain cache (docs/sql.md): emptying it only costs the next refresh a GetSchema.
  await sql(kld.databaseUrl, 'DELETE FROM provider_schemas');
  const coldProfile = await profileRefresh(kld.url, state, { ...options, pool });
  profiled(coldProfile, `pool ${pool}, schema cache emptied first`);
  const probe = await probeReadConcurrency(kld.url, state, { cwd: dir, env, levels: [1, 10] });
  console.log(
    `  what-if probe, all ${formatInt(probe[0].reads)} reads through one provider process: ` +
      probe.map((p) => `${p.concurrency} in flight ${secs(p.ms)}`).join(', '),
  );
  return {
    label,
    pool,
    kl: klRuns,
    otherPool,
    klOther,
    klOut,
    terraform: tfRuns,
    profile,
    otherProfile,
    coldProfile,
    probe,
    ab,
  };
}

/**
 * KL_BENCH_BASE_KL's kl and ours refresh the same state in alternation (the
 * order flips every round, so neither always runs second), each with its
 * default pool and with --pool 1. CPU is what load distorts least: kl's own
 * with its provider processes (they are its children, reaped when it waits
 * for them), kld's and PostgreSQL's over the run.
 */
async function beforeAfter(
  state: string,
  dir: string,
  env: NodeJS.ProcessEnv,
  kld: Kld,
): Promise<AbRun[]> {
  const runs: AbRun[] = [];
  const one = async (build: 'base' | 'ours', pool: number | undefined) => {
    const args = [
      'refresh',
      state,
      ...(pool === undefined ? [] : ['--pool', String(pool)]),
      ...(build === 'ours' ? KL_ARGS : []),
    ];
    const pgMeter = postgres ? new DatabaseCpuMeter(postgres.postmaster, postgres.database) : null;
    const pg0 = pgMeter ? pgMeter.totalMs() : NaN;
    const cpu0 = reapedChildrenCpuMs();
    const kld0 = processCpuMs(kld.pid);
    const r = await kl(dir, env, args, kld, build === 'base' ? BASE_KL : KL);
    const run: AbRun = {
      build,
      pool,
      wallMs: r.ms,
      klCpuMs: reapedChildrenCpuMs() - cpu0,
      kldCpuMs: processCpuMs(kld.pid) - kld0,
      postgresCpuMs: pgMeter ? pgMeter.totalMs() - pg0 : NaN,
    };
    pgMeter?.stop();
    runs.push(run);
    console.log(
      `  before/after: ${build} kl refresh${pool === undefined ? '' : ` --pool ${pool}`}: ` +
        `${secs(run.wallMs)} wall; CPU kl+providers ${secs(run.klCpuMs)}, kld ` +
        `${secs(run.kldCpuMs)}, PostgreSQL ${secs(run.postgresCpuMs)}  ${r.stdout.split('\n')[0]}`,
    );
  };
  for (let round = 0; round < AB_ROUNDS; round++) {
    const order: ('base' | 'ours')[] = round % 2 === 0 ? ['base', 'ours'] : ['ours', 'base'];
    for (const pool of [undefined, 1]) for (const build of order) await one(build, pool);
  }
  return runs;
}

function rowsOf(c: Comparison, target: number): Row[] {
  const warm = c.kl.slice(1).map((r) => r.ms);
  const ours = warm.length > 0 ? median(warm) : c.kl[0].ms;
  if (c.terraform.length === 0) {
    const single = c.klOther.map((r) => r.ms);
    return [
      {
        measurement: `${c.label}: kl refresh (pool ${c.pool}), terraform not run`,
        ours: secs(ours),
        peer: '-',
        ratio: '-',
        target: `≥ ${target}×`,
        result: '-',
      },
      ...(single.length === 0
        ? []
        : [
            {
              measurement: `${c.label}: kl refresh --pool ${c.otherPool}, terraform not run`,
              ours: secs(median(single)),
              peer: '-',
              ratio: '-',
              target: '- (info)',
              result: '-',
            },
          ]),
    ];
  }
  const peer = median(c.terraform.map((r) => r.ms));
  const ratio = peer / ours;
  const coldRatio = peer / c.kl[0].ms;
  const single = c.klOther.map((r) => r.ms);
  const singleRows: Row[] =
    single.length === 0
      ? []
      : [
          {
            measurement: `${c.label}: kl refresh --pool ${c.otherPool} vs terraform plan -refresh-only`,
            ours: `${secs(median(single))} (median of ${single.length}, cached schema)`,
            peer: secs(peer),
            ratio: `${(peer / median(single)).toFixed(1)}×`,
            target: '- (info)',
            result: '-',
          },
        ];
  return [
    {
      measurement: `${c.label}: kl refresh (pool ${c.pool}) vs terraform plan -refresh-only`,
      ours: `${secs(ours)}${warm.length > 0 ? ` (median of ${warm.length}, cached schema)` : ''}`,
      peer: `${secs(peer)} (median of ${c.terraform.length})`,
      ratio: `${ratio.toFixed(1)}×`,
      target: `≥ ${target}×`,
      result: verdict(ratio >= target),
    },
    ...singleRows,
    {
      measurement: `${c.label}: first kl refresh (pool ${c.pool}, empty schema cache)`,
      ours: secs(c.kl[0].ms),
      peer: secs(peer),
      ratio: `${coldRatio.toFixed(1)}×`,
      target: '- (info)',
      result: '-',
    },
  ];
}

// ---------------------------------------------------------------------------
// helpers

async function kl(
  dir: string,
  env: NodeJS.ProcessEnv,
  args: string[],
  kld: Kld,
  klJs = KL,
): Promise<Timed> {
  const nodeArgs = klJs === KL ? KL_NODE_ARGS : [];
  return mustRun(
    `kl ${args[0]}`,
    process.execPath,
    [...nodeArgs, klJs, '--server', kld.url, ...args],
    {
      cwd: dir,
      env,
      timeoutMs: COMMAND_TIMEOUT_MS,
    },
  );
}

/** The bench's own environment, less anything that would steer terraform, kl or the AWS SDK. */
function cleanEnv(): NodeJS.ProcessEnv {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(
      ([k]) =>
        !k.startsWith('TF_') &&
        !k.startsWith('KL_') &&
        !k.startsWith('AWS_') &&
        !k.startsWith('KLTEST_'),
    ),
  );
  return { ...env, CHECKPOINT_DISABLE: '1', TF_IN_AUTOMATION: '1' };
}

function intEnv(name: string, fallback: number, min = 1): number {
  const v = process.env[name];
  if (v === undefined || v === '') return fallback;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new Error(`${name} must be an integer >= ${min}`);
  return n;
}

function secs(ms: number): string {
  return `${(ms / 1000).toFixed(2)} s`;
}

function mib(bytes: number): string {
  return `${(bytes / 2 ** 20).toFixed(1)} MiB`;
}

function printHeader(origin: string, kld: Kld): void {
  let tfVersion = '?';
  try {
    const out = execFileSync('terraform', ['version', '-json'], {
      env: { ...process.env, CHECKPOINT_DISABLE: '1', TF_CLI_CONFIG_FILE: '/dev/null' },
    }).toString();
    tfVersion = /"terraform_version":\s*"([^"]+)"/.exec(out)?.[1] ?? '?';
  } catch {
    // reported as ?
  }
  console.log('Kilolock refresh benchmark: kl refresh vs terraform plan -refresh-only');
  printMachine();
  console.log(`  node:      ${process.version}; terraform ${tfVersion}`);
  console.log(`  postgres:  ${origin}`);
  console.log(`  kld:       pid ${kld.pid}, ${kld.url}`);
  console.log(`  temp:      ${tmpRoot}`);
}

/** Where the profiled refreshes spent their time: one process or the pool, schema cached and not. */
function printProfile(c: Comparison): void {
  const single = c.otherProfile;
  const warm = c.profile;
  const cold = c.coldProfile;
  const columns = [single, warm, cold];
  const row = (name: string, cells: string[]) =>
    console.log(`  ${name.padEnd(42)} ${cells.map((x) => x.padStart(16)).join(' ')}`);
  console.log(`\nWhere kl refresh spends its time: ${c.label} (in-process, ms)`);
  row('phase', [`pool ${c.otherPool}, cached`, `pool ${c.pool}, cached`, `pool ${c.pool}, empty`]);
  const order = [
    'server startRun',
    'server lock',
    'server getState',
    'server getProviderConfig',
    'provider launch (spawn, handshake, TLS)',
    'schema cache get',
    'provider GetSchema',
    'schema cache put',
    'provider Configure',
    'provider UpgradeResourceState',
    'provider ReadResource',
    'server recordResults',
    'server finishRun',
    'provider Stop',
    'provider close (shutdown, exit)',
    'server unlock',
  ];
  const names = new Set(columns.flatMap((p) => Object.keys(p.spans)));
  const cell = (p: RefreshProfile, name: string): string => {
    const s = p.spans[name];
    if (!s) return '-';
    return s.calls > 1 ? `${formatMs(s.ms)} (${s.calls}×)` : formatMs(s.ms);
  };
  for (const name of [...order, ...[...names].filter((n) => !order.includes(n))]) {
    if (names.has(name))
      row(
        name,
        columns.map((p) => cell(p, name)),
      );
  }
  row(
    'read loop (Configure done → last read)',
    columns.map((p) => formatMs(p.readLoopMs)),
  );
  row(
    'total (wall)',
    columns.map((p) => formatMs(p.wallMs)),
  );
  row(
    'CPU kl (this process)',
    columns.map((p) => formatMs(p.cpu.kl)),
  );
  row(
    'CPU provider processes',
    columns.map((p) => `${formatMs(p.cpu.providers)} (${p.providerProcesses}×)`),
  );
  row(
    'CPU kld',
    columns.map((p) => formatMs(p.cpu.kld)),
  );
  row(
    "CPU PostgreSQL (kld's database)",
    columns.map((p) => formatMs(p.cpu.postgres)),
  );
  const reads = warm.spans['provider ReadResource'] ?? { calls: 0, ms: 0 };
  if (reads.calls > 0) {
    const perRead = (p: RefreshProfile, ms: number) => formatMs(ms / p.report.checked);
    console.log(
      `  per instance (pool ${c.otherPool} / pool ${c.pool}): CPU kl ${perRead(single, single.cpu.kl)} / ` +
        `${perRead(warm, warm.cpu.kl)} ms, provider ${perRead(single, single.cpu.providers)} / ` +
        `${perRead(warm, warm.cpu.providers)} ms, kld ${perRead(single, single.cpu.kld)} / ` +
        `${perRead(warm, warm.cpu.kld)} ms, PostgreSQL ${perRead(single, single.cpu.postgres)} / ` +
        `${perRead(warm, warm.cpu.postgres)} ms; read loop ${perRead(single, single.readLoopMs)} / ` +
        `${perRead(warm, warm.readLoopMs)} ms wall`,
    );
  }
  if (warm.schemaJsonBytes) {
    console.log(
      `  the cached schema is ${mib(warm.schemaJsonBytes)} of JSON, fetched from kld and parsed`,
    );
  }
  const [serial, parallel] = c.probe;
  if (serial && parallel) {
    console.log(
      `  one provider process alone (no kld, no bookkeeping): ${formatInt(serial.reads)} reads in ` +
        `${secs(serial.ms)} one at a time, ${secs(parallel.ms)} with ${parallel.concurrency} in ` +
        `flight (${formatInt((serial.reads * 1000) / parallel.ms)} reads/s)`,
    );
  }
  printBeforeAfter(c.ab);
  const warmRuns = c.kl.slice(1).map((r) => r.ms);
  if (warmRuns.length > 0) {
    console.log(
      `  kl refresh child processes (median ${secs(median(warmRuns))}) vs in-process ` +
        `(${secs(warm.wallMs)}): ≈ ${secs(median(warmRuns) - warm.wallMs)} of node start-up, ` +
        'module loading and exit (noisy: different runs)',
    );
  }
}

/** min / median per build and pool of the before/after rounds. */
function printBeforeAfter(runs: AbRun[]): void {
  if (runs.length === 0) return;
  console.log(`\nBefore/after, in alternation (base: ${BASE_KL}), s: min / median`);
  const row = (cells: string[]) =>
    console.log(
      `  ${cells[0].padEnd(26)} ${cells
        .slice(1)
        .map((x) => x.padStart(14))
        .join(' ')}`,
    );
  row(['run', 'wall', 'CPU kl+prov', 'CPU kld', 'CPU PostgreSQL', 'CPU total']);
  const mm = (xs: number[]) =>
    `${(Math.min(...xs) / 1000).toFixed(2)} / ${(median(xs) / 1000).toFixed(2)}`;
  for (const pool of [undefined, 1]) {
    for (const build of ['base', 'ours'] as const) {
      const rs = runs.filter((r) => r.build === build && r.pool === pool);
      if (rs.length === 0) continue;
      row([
        `${build} ${pool === undefined ? 'default pool' : `--pool ${pool}`} (${rs.length}×)`,
        mm(rs.map((r) => r.wallMs)),
        mm(rs.map((r) => r.klCpuMs)),
        mm(rs.map((r) => r.kldCpuMs)),
        mm(rs.map((r) => r.postgresCpuMs)),
        mm(rs.map((r) => r.klCpuMs + r.kldCpuMs + r.postgresCpuMs)),
      ]);
    }
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${(err as Error)?.stack ?? String(err)}\n`);
  void cleanup().finally(() => process.exit(1));
});
