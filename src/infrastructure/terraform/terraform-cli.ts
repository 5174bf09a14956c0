import { spawn } from 'node:child_process';
import * as os from 'node:os';

export interface TerraformRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** stdout and stderr as they came, colour codes removed. */
  output: string;
  /** stdout alone, as printed. */
  stdout: string;
  /** The caller aborted and terraform was sent SIGINT. */
  interrupted: boolean;
}

export interface TerraformRunOptions {
  cwd: string;
  signal?: AbortSignal;
  onLine?: (line: string) => void;
  /** After SIGINT, how long terraform may take to stop gracefully before SIGKILL. */
  graceMs?: number;
  /** Kills terraform at once (SIGKILL): for a run that has been given nothing to act on yet. */
  kill?: AbortSignal;
  /** Set in terraform's environment besides terraformEnv(). */
  env?: NodeJS.ProcessEnv;
  /** A nice value for terraform's process (higher: yields the CPU to the others). */
  niceness?: number;
}

// eslint-disable-next-line no-control-regex
const ANSI = /\x1b\[[0-9;]*m/g;

/** The terraform binary kl runs: KL_TERRAFORM, else `terraform` on PATH. */
export function terraformBinary(): string {
  return process.env.KL_TERRAFORM || 'terraform';
}

/**
 * The environment kl's private terraform runs get: the user's, minus what
 * would point terraform elsewhere or add flags behind kl's back.
 */
export function terraformEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k === 'TF_DATA_DIR' || k === 'TF_WORKSPACE' || k.startsWith('TF_CLI_ARGS')) continue;
    env[k] = v;
  }
  env.TF_IN_AUTOMATION = '1';
  env.TF_INPUT = '0';
  env.CHECKPOINT_DISABLE = '1';
  return env;
}

/**
 * Runs terraform once. An abort sends SIGINT, which terraform handles like
 * Ctrl-C: it stops starting work, lets running operations finish or cancel,
 * and writes the state it reached. Only if it has not exited after the grace
 * period is it killed.
 */
export function runTerraform(args: string[], options: TerraformRunOptions): Promise<TerraformRun> {
  return new Promise((resolve) => {
    const child = spawn(terraformBinary(), args, {
      cwd: options.cwd,
      env: { ...terraformEnv(), ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    if (options.niceness !== undefined && child.pid !== undefined) {
      try {
        os.setPriority(child.pid, options.niceness);
      } catch {
        // not allowed here: it runs at kl's own priority
      }
    }
    let output = '';
    let stdout = '';
    let pending = '';
    let interrupted = false;
    let killTimer: NodeJS.Timeout | undefined;
    const take = (chunk: Buffer) => {
      const text = chunk.toString().replace(ANSI, '');
      output += text;
      if (!options.onLine) return;
      pending += text;
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) options.onLine(line);
    };
    child.stdout!.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      take(chunk);
    });
    child.stderr!.on('data', take);
    const onAbort = () => {
      if (interrupted || child.exitCode !== null) return;
      interrupted = true;
      child.kill('SIGINT');
      killTimer = setTimeout(() => child.kill('SIGKILL'), options.graceMs ?? 60_000);
    };
    if (options.signal?.aborted) onAbort();
    options.signal?.addEventListener('abort', onAbort, { once: true });
    const onKill = () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    };
    if (options.kill?.aborted) onKill();
    options.kill?.addEventListener('abort', onKill, { once: true });
    const finish = (code: number | null, signal: NodeJS.Signals | null, extra = '') => {
      clearTimeout(killTimer);
      options.signal?.removeEventListener('abort', onAbort);
      options.kill?.removeEventListener('abort', onKill);
      if (pending !== '' && options.onLine) options.onLine(pending);
      resolve({ code, signal, output: output + extra, stdout, interrupted });
    };
    child.on('error', (err) =>
      finish(
        null,
        null,
        `\ncannot run ${terraformBinary()}: ${(err as NodeJS.ErrnoException).code ?? err.message}`,
      ),
    );
    child.on('close', (code, signal) => finish(code, signal));
  });
}
