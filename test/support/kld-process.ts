import { ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as https from 'node:https';
import * as path from 'node:path';
import { freePort } from '../../src/infrastructure/postgres/embedded-postgres';

export const ROOT = path.resolve(__dirname, '../..');
export const KLD = path.join(ROOT, 'dist/src/kld.js');
export const KL = path.join(ROOT, 'dist/src/cli/kl.js');

export interface KldProcess {
  url: string;
  /** host:port of its gRPC event service (KL_GRPC_LISTEN). */
  grpc: string;
  child: ChildProcess;
  output(): string;
  /** SIGTERM and wait; resolves with the exit code and how long it took. */
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; ms: number }>;
}

/** Every kld started by this worker: one a failed `beforeAll` never stopped must not outlive it. */
const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
});

/**
 * Starts the built `kld serve` as a real child process and waits for /readyz
 * (or only /healthz, for a server that is expected not to be ready).
 * A variable set to undefined in `env` is left out of the child's environment.
 */
export async function startKld(
  env: Record<string, string | undefined>,
  readyTimeoutMs = 30_000,
  options: {
    cwd?: string;
    waitFor?: 'readyz' | 'healthz';
    /** kld serves HTTPS (KL_TLS_* in env): trust `ca`, present `cert`/`key` if given. */
    tls?: TlsClient;
    /** kld's arguments after `serve --listen …` (e.g. `--config kld.yaml`). */
    args?: string[];
  } = {},
): Promise<KldProcess> {
  const port = await freePort();
  const grpc = env.KL_GRPC_LISTEN ?? `127.0.0.1:${await freePort()}`;
  const args = [KLD, ...(options.args ?? []), 'serve', '--listen', `127.0.0.1:${port}`];
  const child = spawn(process.execPath, args, {
    env: {
      ...process.env,
      KL_LOG_FORMAT: 'json',
      KL_LOG_LEVEL: 'info',
      ...env,
      KL_GRPC_LISTEN: grpc,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
    cwd: options.cwd,
  });
  children.add(child);
  child.once('exit', () => children.delete(child));
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  const url = `${options.tls ? 'https' : 'http'}://127.0.0.1:${port}`;
  const deadline = Date.now() + readyTimeoutMs;
  for (;;) {
    if (child.exitCode !== null)
      throw new Error(`kld exited (${child.exitCode}) during start:\n${out}`);
    try {
      const path = `/${options.waitFor ?? 'readyz'}`;
      const status = options.tls
        ? await httpsStatus(`${url}${path}`, options.tls)
        : (await fetch(`${url}${path}`)).status;
      if (status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`kld not ready within ${readyTimeoutMs} ms:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    grpc,
    child,
    output: () => out,
    stop: (signal = 'SIGTERM') =>
      new Promise((resolve) => {
        if (child.exitCode !== null) return resolve({ code: child.exitCode, ms: 0 });
        const started = Date.now();
        child.once('exit', (code) => resolve({ code, ms: Date.now() - started }));
        child.kill(signal);
      }),
  };
}

export interface TlsClient {
  ca: string;
  cert?: string;
  key?: string;
}

/** GET over HTTPS with our own CA (fetch takes none); answers the status. */
export function httpsStatus(url: string, tls: TlsClient, headers: Record<string, string> = {}) {
  return new Promise<number>((resolve, reject) => {
    const req = https.get(url, { ...tls, headers }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
  });
}

/** PIDs of live (non-zombie) processes whose command line contains `needle`. */
export function processesMatching(needle: string): number[] {
  const pids: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const status = fs.readFileSync(`/proc/${entry}/status`, 'utf8');
      if (/^State:\s+Z/m.test(status)) continue;
      const cmdline = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').replace(/\0/g, ' ');
      if (cmdline.includes(needle)) pids.push(Number(entry));
    } catch {
      // exited while we looked
    }
  }
  return pids;
}

/** PIDs of the live (non-zombie) descendants of `root`, children before grandchildren. */
export function descendantsOf(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const status = fs.readFileSync(`/proc/${entry}/status`, 'utf8');
      if (/^State:\s+Z/m.test(status)) continue;
      const ppid = Number(/^PPid:\s+(\d+)/m.exec(status)?.[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
    } catch {
      // exited while we looked
    }
  }
  const found: number[] = [];
  for (let queue = [root]; queue.length > 0;) {
    const next = children.get(queue.shift()!) ?? [];
    found.push(...next);
    queue.push(...next);
  }
  return found;
}

/** Whether `pid` is a live, non-zombie process. */
export function isAlive(pid: number): boolean {
  try {
    return !/^State:\s+Z/m.test(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return false;
  }
}
