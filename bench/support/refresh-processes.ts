import { ChildProcess, spawn } from 'node:child_process';
import { Client } from 'pg';
import { startKld as startKldProcess } from './kld-process';

/**
 * Child processes of the refresh bench: every one is tracked so a single
 * `killAll` (on success, error or signal) leaves nothing running.
 */
export const children = new Set<ChildProcess>();

/**
 * SIGTERM every child still running (terraform then stops its providers
 * itself), SIGKILL whatever is left after `graceMs`.
 */
export async function killAll(graceMs = 3_000): Promise<void> {
  const live = [...children].filter((c) => c.exitCode === null && c.signalCode === null);
  if (live.length === 0) return;
  const exited = Promise.all(live.map((c) => new Promise((r) => c.once('exit', r))));
  for (const child of live) child.kill('SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([exited, new Promise((r) => (timer = setTimeout(r, graceMs)))]);
  clearTimeout(timer);
  for (const child of live) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}

export interface Timed {
  code: number | null;
  ms: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs a command to completion and times it from spawn to exit (wall).
 * stdout and stderr are kept (tail only past 1 MiB) for the report.
 */
export function timed(
  command: string,
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs?: number },
): Promise<Timed> {
  return new Promise((resolve, reject) => {
    const startedAt = performance.now();
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: options.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.add(child);
    let stdout = '';
    let stderr = '';
    const keep = (s: string, c: Buffer) => (s + c.toString()).slice(-(1 << 20));
    child.stdout!.on('data', (c: Buffer) => (stdout = keep(stdout, c)));
    child.stderr!.on('data', (c: Buffer) => (stderr = keep(stderr, c)));
    const timer = options.timeoutMs
      ? setTimeout(() => child.kill('SIGKILL'), options.timeoutMs)
      : undefined;
    child.on('error', (e) => {
      clearTimeout(timer);
      children.delete(child);
      reject(e);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      children.delete(child);
      resolve({ code, ms: performance.now() - startedAt, stdout, stderr });
    });
  });
}

/** `timed`, failing on a non-zero exit (except the codes allowed, e.g. 2 for -detailed-exitcode). */
export async function mustRun(
  what: string,
  command: string,
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs?: number; okCodes?: number[] },
): Promise<Timed> {
  const r = await timed(command, args, options);
  if (!(options.okCodes ?? [0]).includes(r.code ?? -1)) {
    throw new Error(
      `${what} exited ${r.code}\n${r.stdout.slice(-3000)}\n${r.stderr.slice(-3000)}`.trim(),
    );
  }
  return r;
}

export interface Kld {
  pid: number;
  url: string;
  databaseUrl: string;
  stop(): Promise<void>;
}

/** The built `kld serve` as its own process on `databaseUrl`; waits for /readyz. */
export async function startKld(kldJs: string, databaseUrl: string, dataDir: string): Promise<Kld> {
  const kld = await startKldProcess({ kld: kldJs, databaseUrl, dataDir, children });
  return { pid: kld.pid, url: kld.url, databaseUrl, stop: kld.stop };
}

/** The http backend block terraform writes through to kld, with kld's LOCK/UNLOCK methods. */
export function httpBackend(kldUrl: string, state: string): string {
  const address = JSON.stringify(`${kldUrl}/v1/states/${state}`);
  return (
    `  backend "http" {\n    address        = ${address}\n    lock_address   = ${address}\n` +
    `    unlock_address = ${address}\n    lock_method    = "LOCK"\n    unlock_method  = "UNLOCK"\n  }\n`
  );
}

/** One statement on the bench database. */
export async function sql(databaseUrl: string, text: string): Promise<void> {
  const client = new Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}
