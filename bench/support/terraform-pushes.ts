import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { KldProcess } from './kld-process';
import { processCpuMs, processTreeCpuMs, reapedChildrenCpuMs } from './process-cpu';
import { SyntheticState } from './state-generator';
import { terraformEnv } from './terraform-env';

/** Where the probes' `terraform state push` runs go: the `pg` backend, or one kld build. */
export interface PushTarget {
  label: string;
  /** kld's pid; 0 for the `pg` backend. */
  pid: number;
  /** terraform's working directory, initialised for this backend. */
  dir: string;
}

/** terraform to completion (with TF_LOG=DEBUG into `log` when given); its wall time. */
function runTerraform(
  cwd: string,
  env: NodeJS.ProcessEnv,
  args: string[],
  log?: string,
): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const extra = log ? { TF_LOG: 'DEBUG', TF_LOG_PATH: log } : {};
    const child = spawn('terraform', args, {
      cwd,
      env: { ...env, ...extra },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let err = '';
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0
        ? resolve(performance.now() - t0)
        : reject(new Error(`terraform in ${cwd} ${args.join(' ')}: ${err}`)),
    );
  });
}

/**
 * One working directory per backend (the `pg` backend on `pgUrl`'s server,
 * then each kld build's state `tf-probe`), initialised, each holding a
 * synthetic state of `instances` pushed with -force (twice: the first push
 * over the empty state `init` left keeps that state's lineage). The caller
 * then pushes next serials: change `state`, raise its serial, write `file`.
 */
async function preparePushTargets(options: {
  tmp: string;
  pgUrl: string;
  builds: readonly { label: string; kld: KldProcess }[];
  instances: number;
}): Promise<{
  env: NodeJS.ProcessEnv;
  targets: PushTarget[];
  state: SyntheticState;
  file: string;
}> {
  const { tmp } = options;
  const rc = path.join(tmp, 'terraformrc');
  fs.writeFileSync(rc, '\n');
  const env = terraformEnv(rc);
  const conn = new URL(options.pgUrl);
  conn.pathname = '/postgres';
  conn.searchParams.set('sslmode', 'disable');
  const backends = [
    {
      label: 'pg',
      pid: 0,
      tf: `terraform {\n backend "pg" {\n conn_str = ${JSON.stringify(conn.toString())}\n }\n}\n`,
    },
    ...options.builds.map((b) => {
      const a = JSON.stringify(`${b.kld.url}/v1/states/tf-probe`);
      return {
        label: b.label,
        pid: b.kld.pid,
        tf: `terraform {\n backend "http" {\n address = ${a}\n lock_address = ${a}\n unlock_address = ${a}\n }\n}\n`,
      };
    }),
  ];
  const state = new SyntheticState({ instances: options.instances });
  const file = path.join(tmp, 'push.tfstate');
  fs.writeFileSync(file, state.text());
  const targets: PushTarget[] = [];
  for (const b of backends) {
    const dir = path.join(tmp, `tf-${b.label}`);
    fs.mkdirSync(dir);
    fs.writeFileSync(path.join(dir, 'main.tf'), b.tf);
    await runTerraform(dir, env, ['init', '-input=false', '-no-color']);
    await runTerraform(dir, env, ['state', 'push', '-force', file]);
    await runTerraform(dir, env, ['state', 'push', '-force', file]);
    targets.push({ label: b.label, pid: b.pid, dir });
  }
  return { env, targets, state, file };
}

/**
 * One timed push: its wall time, its kld's CPU (0 for `pg`), terraform's own
 * CPU (10 ms ticks) and, with a postmaster, PostgreSQL's (every backend).
 */
export interface PushTime {
  ms: number;
  cpu: number;
  terraform: number;
  postgres: number;
}

/**
 * Prepares the targets (see preparePushTargets), then `pushes` rounds: each
 * changes one instance of the state, raises its serial and pushes it with
 * `terraform state push` to every target in turn. `around` runs before each
 * push and returns what runs after it (with the push's round), for what a
 * probe records beside the times; `log` names a file for terraform's DEBUG
 * log of a push.
 */
export async function pushNextSerials(options: {
  tmp: string;
  pgUrl: string;
  builds: readonly { label: string; kld: KldProcess }[];
  instances: number;
  pushes: number;
  around?: (target: PushTarget, round: number) => Promise<() => Promise<void>>;
  log?: (target: PushTarget) => string;
  /** The PostgreSQL serving kld and `pg`, for its CPU per push. */
  postmaster?: number | null;
}): Promise<Map<string, PushTime[]>> {
  const { env, targets, state, file } = await preparePushTargets(options);
  const times = new Map<string, PushTime[]>(targets.map((t) => [t.label, []]));
  for (let i = 0; i < options.pushes; i++) {
    state.changeOne(1_000_003 + i * 31);
    state.serial += 1;
    fs.writeFileSync(file, state.text());
    for (const t of targets) {
      const after = options.around ? await options.around(t, i) : null;
      const pm = options.postmaster ?? 0;
      const before = t.pid ? processCpuMs(t.pid) : 0;
      const [tf0, pg0] = [reapedChildrenCpuMs(), pm ? processTreeCpuMs(pm) : 0];
      const ms = await runTerraform(t.dir, env, ['state', 'push', file], options.log?.(t));
      times.get(t.label)!.push({
        ms,
        cpu: t.pid ? processCpuMs(t.pid) - before : 0,
        terraform: reapedChildrenCpuMs() - tf0,
        postgres: pm ? processTreeCpuMs(pm) - pg0 : 0,
      });
      if (after) await after();
    }
  }
  return times;
}
