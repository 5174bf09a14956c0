import { ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as https from 'node:https';
import * as path from 'node:path';

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
 *
 * kld binds port 0 (HTTP, and gRPC unless `env` names an address) and the
 * ports come from its "listening" log lines: a port picked free beforehand
 * was taken by another worker's connection in the seconds kld spends
 * migrating before it binds (EADDRINUSE in a CI run).
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
    /** kld's limit of open files (`ulimit -n`), when lower than this process's. */
    openFiles?: number;
  } = {},
): Promise<KldProcess> {
  const args = [KLD, ...(options.args ?? []), 'serve', '--listen', '127.0.0.1:0'];
  const [command, argv] =
    options.openFiles === undefined
      ? [process.execPath, args]
      : [
          '/bin/sh',
          ['-c', `ulimit -n ${options.openFiles} && exec "$@"`, 'sh', process.execPath, ...args],
        ];
  const child = spawn(command, argv, {
    env: {
      ...process.env,
      KL_LOG_FORMAT: 'json',
      KL_LOG_LEVEL: 'info',
      ...env,
      KL_GRPC_LISTEN: env.KL_GRPC_LISTEN ?? '127.0.0.1:0',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
    cwd: options.cwd,
  });
  children.add(child);
  child.once('exit', () => children.delete(child));
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  const deadline = Date.now() + readyTimeoutMs;
  let bound: { url: string; grpc: string } | null = null;
  for (;;) {
    if (child.exitCode !== null)
      throw new Error(`kld exited (${child.exitCode}) during start:\n${out}`);
    bound ??= listeningAt(out, env.KL_GRPC_LISTEN);
    if (bound && (await answers200(`${bound.url}/${options.waitFor ?? 'readyz'}`, options.tls)))
      break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`kld not ready within ${readyTimeoutMs} ms:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const { url, grpc } = bound;
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

/**
 * Where kld said it listens: the URL of its "kld listening" line and the
 * address of its gRPC line (`off` when turned off); null until both are out.
 */
export function listeningAt(
  output: string,
  grpcListen: string | undefined,
): { url: string; grpc: string } | null {
  let url: string | undefined;
  let grpc = grpcListen === 'off' ? 'off' : undefined;
  for (const line of output.split('\n')) {
    if (!line.startsWith('{')) continue;
    let entry: { msg?: unknown; url?: unknown; grpc?: unknown };
    try {
      entry = JSON.parse(line) as typeof entry;
    } catch {
      continue; // a line still being written
    }
    if (entry.msg === 'kld listening' && typeof entry.url === 'string') url = entry.url;
    if (entry.msg === 'kld gRPC events listening' && typeof entry.grpc === 'string')
      grpc = entry.grpc;
  }
  return url && grpc ? { url, grpc } : null;
}

/** The URL answers 200 (false while kld is not listening yet). */
async function answers200(url: string, tls: TlsClient | undefined): Promise<boolean> {
  try {
    return (tls ? await httpsStatus(url, tls) : (await fetch(url)).status) === 200;
  } catch {
    return false;
  }
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
