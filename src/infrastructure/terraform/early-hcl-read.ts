import * as path from 'node:path';
import { Worker } from 'node:worker_threads';
import type { ModuleSource } from '../../application/apply/terraform-workspace.port';

/**
 * A configuration directory read on a thread of its own (`readEarly`), for
 * an `HclConfigReader` of the main thread to take what matches of it.
 */
export interface EarlyRead {
  /** The directory it reads (absolute). */
  dir: string;
  /** What it read, or null if it failed: whoever needs the files reads them again. */
  source: Promise<ModuleSource | null>;
  /** Resolves once its thread has ended, the cache entries it made written. */
  ended: Promise<void>;
}

/** What the read's thread runs: `hcl-read-worker.ts`, beside this file in `dist/`. */
export const HCL_READ_WORKER = path.join(__dirname, 'hcl-read-worker.js');

/**
 * Starts reading `dir` (its `.tf` files, through kl's units cache, parsing
 * the misses) on a worker thread: the second core is idle while kl's main
 * thread loads its modules, and the grammar's WebAssembly and the parse of
 * an edited file (15–18 ms) would otherwise run on the main thread on the
 * way to `terraform plan`'s start. Never throws: a thread that cannot start,
 * fails or ends without an answer leaves `source` null.
 */
export function readEarly(
  dir: string,
  start: (dir: string) => Worker = (d) => new Worker(HCL_READ_WORKER, { workerData: { dir: d } }),
): EarlyRead {
  let worker: Worker;
  try {
    worker = start(dir);
  } catch {
    return { dir, source: Promise.resolve(null), ended: Promise.resolve() };
  }
  const ended = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
  const source = new Promise<ModuleSource | null>((resolve) => {
    worker.once('message', (m: { source?: ModuleSource | null } | null) =>
      resolve(m?.source ?? null),
    );
    // Listened to, or a failing thread would take kl down with it.
    worker.once('error', () => resolve(null));
    void ended.then(() => resolve(null));
  });
  return { dir, source, ended };
}
