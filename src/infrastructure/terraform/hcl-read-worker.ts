import { parentPort, workerData } from 'node:worker_threads';
import { defaultHclUnitsCache, HclConfigReader } from './hcl-reader';

/**
 * The thread `readEarly` starts: kl's own reader and units cache on one
 * directory. It answers with what it read (null if the read failed: the
 * main thread then reads, and reports, as it would without it), then writes
 * the cache entries of the files it parsed and ends.
 */
const reader = new HclConfigReader(defaultHclUnitsCache());
const { dir } = workerData as { dir: string };
void reader
  .readModule(dir)
  .then(
    (source) => parentPort?.postMessage({ source }),
    () => parentPort?.postMessage({ source: null }),
  )
  .then(() => reader.settled());
