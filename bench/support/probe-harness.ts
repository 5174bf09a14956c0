import { ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { EmbeddedPostgres } from '../../src/infrastructure/postgres/embedded-postgres';
import { openBenchDatabase } from './bench-database';
import { KldProcess, startKld } from './kld-process';
import { postmasterOf } from './process-cpu';

/** One kld build a probe runs, on a database of its own. */
export interface ProbeKld {
  label: string;
  /** The build's entry point (`dist/src/kld.js`), as given. */
  entry: string;
  kld: KldProcess;
  databaseUrl: string;
  /** Stops this kld and starts the same build again on the same database. */
  restart(): Promise<KldProcess>;
}

export interface ProbeContext {
  tmp: string;
  pg: EmbeddedPostgres;
  /** The embedded server's postmaster (for CPU meters), or null. */
  postmaster: number | null;
  /** One kept-alive connection, as terraform uses. */
  agent: http.Agent;
  klds: ProbeKld[];
}

/**
 * The frame of the probes under bench/support: the kld builds named on the
 * command line as LABEL=path/to/kld.js, each started on its own database of
 * one embedded PostgreSQL; `body` runs with them; the load is printed after;
 * every process and directory goes, whatever happens.
 */
export async function runProbe(
  name: string,
  body: (ctx: ProbeContext) => Promise<void>,
  /** Runs before any kld starts (to set what they inherit). */
  beforeStart?: (tmp: string) => void,
): Promise<void> {
  // At debug, PostgreSQL's own log lines (its statements, when it logs them) come too.
  const logger = pino(
    { level: process.env.KL_PROBE_PG_LOG === '1' ? 'debug' : 'warn' },
    pino.destination(2),
  );
  const builds = process.argv.slice(2).map((arg) => {
    const [label, kld] = arg.split('=');
    return { label, kld };
  });
  if (builds.length === 0) throw new Error('give LABEL=path/to/kld.js, one or more');
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), `kl-${name}-`));
  const pgDir = fs.mkdtempSync(path.join(os.tmpdir(), `kl-${name}-pg-`));
  beforeStart?.(tmp);
  const children = new Set<ChildProcess>();
  const pg = await EmbeddedPostgres.start(pgDir, logger);
  process.env.KL_BENCH_DATABASE_URL = pg.url;
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const klds: ProbeKld[] = [];
  try {
    for (const { label, kld } of builds) {
      // Each kld migrates its own database: another build may know fewer migrations.
      const { url: databaseUrl } = await openBenchDatabase(logger, { migrate: false });
      const start = () => startKld({ kld, databaseUrl, dataDir: path.join(tmp, label), children });
      const k: ProbeKld = {
        label,
        entry: kld,
        kld: await start(),
        databaseUrl,
        restart: async () => {
          await k.kld.stop();
          k.kld = await start();
          return k.kld;
        },
      };
      klds.push(k);
    }
    await body({ tmp, pg, postmaster: postmasterOf(pgDir), agent, klds });
    console.log(
      `load after ${os
        .loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')}`,
    );
  } finally {
    agent.destroy();
    for (const k of klds) await k.kld.stop();
    for (const c of children) c.kill('SIGKILL');
    await pg.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
    fs.rmSync(pgDir, { recursive: true, force: true });
  }
}

/** Terraform's LockInfo for lock `id`, as the body of LOCK and UNLOCK. */
export function lockInfoBody(id: string, who: string): Buffer {
  return Buffer.from(
    JSON.stringify({
      ID: id,
      Operation: 'OperationTypeInvalid',
      Info: '',
      Who: who,
      Version: '1.11.4',
      Created: new Date().toISOString(),
      Path: '',
    }),
  );
}
