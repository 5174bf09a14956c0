import { ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import { freePort } from '../../src/infrastructure/postgres/embedded-postgres';

export interface KldProcess {
  pid: number;
  url: string;
  /** `127.0.0.1:port` when started with gRPC, else null. */
  grpc: string | null;
  child: ChildProcess;
  /** ms from its spawn to the first 200 of /readyz (within `pollMs`). */
  readyMs: number;
  /** SIGTERM, then SIGKILL after 10 s; resolves once it exited. */
  stop(): Promise<void>;
}

export interface KldOptions {
  /** The kld entry point (`dist/src/kld.js` of this or another build). */
  kld: string;
  databaseUrl: string;
  /** kld's data directory (created when missing). */
  dataDir: string;
  /** Listen for gRPC on a free port too (default: off). */
  grpc?: boolean;
  /** Every child is added here until it exits, for the bench's last-resort SIGKILL. */
  children: Set<ChildProcess>;
  /** Each line kld writes to stdout (e.g. `--trace-gc`'s, through KL_BENCH_KLD_NODE_ARGS). */
  onStdoutLine?: (line: string) => void;
  /** KL_LOG_LEVEL (default warn). */
  logLevel?: string;
  /** How often /readyz is asked while it starts (default 100 ms). */
  pollMs?: number;
}

/**
 * `kld serve` as its own process, as in production; waits (60 s at most) for
 * /readyz. KL_BENCH_KLD_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" passes
 * node options to it, e.g. to profile kld itself.
 */
export async function startKld(options: KldOptions): Promise<KldProcess> {
  const port = await freePort();
  const grpc = options.grpc ? `127.0.0.1:${await freePort()}` : null;
  fs.mkdirSync(options.dataDir, { recursive: true });
  const nodeArgs = (process.env.KL_BENCH_KLD_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const spawned = performance.now();
  const child = spawn(
    process.execPath,
    [...nodeArgs, options.kld, 'serve', '--listen', `127.0.0.1:${port}`],
    {
      env: {
        ...process.env,
        KL_DATABASE_URL: options.databaseUrl,
        KL_DATA_DIR: options.dataDir,
        KL_LOG_LEVEL: options.logLevel ?? 'warn',
        KL_LOG_FORMAT: 'json',
        KL_GRPC_LISTEN: grpc ?? 'off',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  options.children.add(child);
  child.once('exit', () => options.children.delete(child));
  let tail = '';
  const keep = (c: Buffer) => (tail = (tail + c.toString()).slice(-4000));
  child.stdout!.on('data', keep);
  const onLine = options.onStdoutLine;
  if (onLine) {
    let partial = '';
    child.stdout!.on('data', (c: Buffer) => {
      const lines = (partial + c.toString()).split('\n');
      partial = lines.pop()!;
      for (const line of lines) onLine(line);
    });
  }
  child.stderr!.on('data', keep);
  const stop = () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      child.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      child.kill('SIGTERM');
    });
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitReady(
      url,
      () => {
        if (child.exitCode !== null) throw new Error(`kld exited (${child.exitCode}):\n${tail}`);
      },
      options.pollMs,
    );
  } catch (err) {
    await stop();
    throw err;
  }
  return { pid: child.pid!, url, grpc, child, readyMs: performance.now() - spawned, stop };
}

/** Until /readyz answers 200 (read models caught up), 60 s at most. */
export async function waitReady(
  url: string,
  check: () => void = () => undefined,
  pollMs = 100,
): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    check();
    try {
      if ((await fetch(`${url}/readyz`)).status === 200) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`kld not ready within 60 s`);
    await new Promise((r) => setTimeout(r, pollMs));
  }
}
