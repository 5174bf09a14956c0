import { SingleBar } from 'cli-progress';
import { Command } from 'commander';
import * as os from 'node:os';
import { oneLine } from '../../application/refresh/one-line';
import { RefreshOrchestrator } from '../../application/refresh/refresh-orchestrator';
import { RefreshProgress, RefreshReport, toWire } from '../../application/refresh/refresh-report';
import { CachedSchemaProviderFactory } from '../../infrastructure/provider/provider-factory';
import { RestProviderSchemaCache } from '../../infrastructure/provider/rest-provider-schema-cache';
import {
  FileProviderSchemaCache,
  TieredProviderSchemaCache,
} from '../../infrastructure/provider/file-provider-schema-cache';
import { FactoryProviderOpener } from '../../infrastructure/refresh/factory-provider-opener';
import { KldHttpClient } from '../../infrastructure/rest/kld-http-client';
import { RestRefreshServer } from '../../infrastructure/refresh/rest-refresh-server';
import { systemRefreshHost } from '../../infrastructure/refresh/system-refresh-host';
import { renderJson } from '../render';
import { visible, visibleLines } from '../terminal-text';
import { usage } from './context';

interface RefreshCommandOptions {
  dryRun?: boolean;
  failFast?: boolean;
  concurrency?: string;
  pool?: string;
  parallelism?: string;
  actor: string;
  providerSearchPath: string[];
}

interface Globals {
  server: string;
  token?: string;
  format: 'table' | 'json' | 'csv';
}

/** Printed addresses per list; the rest is one `kl drift` (or SQL) away. */
const LIST_LIMIT = 25;
/** A cancelled refresh must be gone within 5 s; this is the last resort if cleanup hangs. */
const CANCEL_DEADLINE_MS = 4_500;
const EXIT_ON_SIGNAL: Record<string, number> = { SIGINT: 130, SIGTERM: 143 };

/** `kl refresh <state>`: ADR 0005/0006 refresh, run on this machine with this machine's credentials. */
export function registerRefreshCommand(program: Command): void {
  program
    .command('refresh')
    .description(
      'read every managed resource of a state through its providers and record drift (then plan with -refresh=false)',
    )
    .argument('<state>', 'state name')
    .option('--dry-run', 'refresh and report, but commit no new state version')
    .option('--fail-fast', 'stop at the first resource that fails')
    .option(
      '--concurrency <n>',
      'provider configurations refreshed at once (default: number of CPUs)',
    )
    .option(
      '--pool <n>',
      'provider processes per provider configuration, each configured once, sharing its reads (default: one per CPU less one for kl, at most 4, at most one per 250 instances; 1 = one process, as terraform)',
    )
    .option(
      '--parallelism <n>',
      'reads in flight per provider process, like terraform -parallelism (default 10; 1 = one at a time)',
    )
    .option(
      '--actor <actor>',
      'who runs the refresh, recorded with the run and the lock',
      defaultActor(),
    )
    .option(
      '--provider-search-path <path>',
      'provider directory (<host>/<namespace>/<type>/<version>/<os>_<arch>/), searched before KL_PROVIDER_PATH and the defaults; repeatable',
      (value: string, all: string[]) => [...all, value],
      [] as string[],
    )
    .addHelpText(
      'after',
      '\nExit status: 0 success, 1 a resource failed or the run failed, 2 usage, 130/143 cancelled by SIGINT/SIGTERM.' +
        '\nProvider configs: kl provider configure <state> <source> --from-json <file> (see docs/usage/refresh.md).',
    )
    .action(async (state: string, options: RefreshCommandOptions, command: Command) => {
      const concurrency = positiveOption(command, options.concurrency, '--concurrency');
      const pool = positiveOption(command, options.pool, '--pool');
      const parallelism = positiveOption(command, options.parallelism, '--parallelism');
      const globals = command.optsWithGlobals<Globals>();
      process.exitCode = await runRefresh(
        state,
        { ...options, concurrency, pool, parallelism },
        globals,
      );
    });
}

async function runRefresh(
  state: string,
  options: Omit<RefreshCommandOptions, 'concurrency' | 'pool' | 'parallelism'> & {
    concurrency: number | undefined;
    pool: number | undefined;
    parallelism: number | undefined;
  },
  globals: Globals,
): Promise<number> {
  const http = new KldHttpClient(globals.server, { token: globals.token, actor: options.actor });
  const server = new RestRefreshServer(http);
  const cache = new TieredProviderSchemaCache([
    new FileProviderSchemaCache(),
    new RestProviderSchemaCache(http),
  ]);
  const factory = new CachedSchemaProviderFactory(cache, {
    // Keeps a cancelled refresh inside its 5 s budget even if a provider ignores Shutdown.
    shutdownGraceMs: 1_000,
  });
  const orchestrator = new RefreshOrchestrator(
    server,
    new FactoryProviderOpener(factory),
    systemRefreshHost(),
  );

  const cancel = new AbortController();
  let signalled: NodeJS.Signals | null = null;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (signalled) {
      // A second Ctrl-C: leave now; the plugin-process exit hook still kills providers.
      process.exit(EXIT_ON_SIGNAL[signal] ?? 1);
    }
    signalled = signal;
    process.stderr.write(`\nkl: ${signal}: stopping providers and cancelling the refresh…\n`);
    setTimeout(() => {
      process.stderr.write('kl: cancellation did not finish in time; exiting\n');
      process.exit(EXIT_ON_SIGNAL[signal] ?? 1);
    }, CANCEL_DEADLINE_MS).unref();
    cancel.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  const bar = process.stderr.isTTY ? new ProgressBar() : null;
  try {
    const report = await orchestrator.run(
      state,
      {
        dryRun: options.dryRun === true,
        failFast: options.failFast === true,
        concurrency: options.concurrency,
        pool: options.pool,
        parallelism: options.parallelism,
        actor: options.actor,
        providerSearchPaths: options.providerSearchPath,
        onProgress: bar ? (p) => bar.update(p) : undefined,
      },
      cancel.signal,
    );
    bar?.stop();
    process.stdout.write(
      globals.format === 'json' ? renderJson(toWire(report)) : visibleLines(renderReport(report)),
    );
    for (const w of report.warnings) process.stderr.write(`kl: warning: ${visible(w)}\n`);
    if (report.status === 'cancelled') return EXIT_ON_SIGNAL[signalled ?? 'SIGINT'] ?? 1;
    return report.status === 'succeeded' ? 0 : 1;
  } catch (e) {
    bar?.stop();
    process.stderr.write(`kl: refresh of "${visible(state)}" failed: ${visible(oneLine(e))}\n`);
    return signalled ? (EXIT_ON_SIGNAL[signalled] ?? 1) : 1;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    // Idle keep-alive sockets or a stray plugin handle must not hold the exit.
    setTimeout(() => process.exit(), 1_000).unref();
  }
}

function positiveOption(command: Command, value: string | undefined, name: string) {
  if (value === undefined) return undefined;
  if (!/^[1-9]\d{0,3}$/.test(value)) {
    usage(command, `${name} must be a positive integer, got "${value}"`);
  }
  return Number(value);
}

function defaultActor(): string {
  let user = process.env.USER;
  if (!user) {
    try {
      user = os.userInfo().username;
    } catch {
      user = 'kl';
    }
  }
  return `${user}@${os.hostname()}`;
}

/** Stable key=value counters first, so the output greps and diffs well. */
export function renderReport(r: RefreshReport): string {
  const seconds = (r.durationMs / 1000).toFixed(1);
  const committed =
    r.toVersion !== null
      ? `version=${r.toVersion}`
      : r.dryRun
        ? 'version=none (dry run)'
        : 'version=none';
  const lines = [
    `status=${r.status} checked=${r.checked} changed=${r.changed} normalized=${r.normalized} gone=${r.gone} failed=${r.failed} skipped=${r.skipped} ${committed} run=${r.runId} duration=${seconds}s`,
  ];
  const list = (title: string, items: string[]): void => {
    if (items.length === 0) return;
    lines.push(`${title}:`);
    for (const item of items.slice(0, LIST_LIMIT)) lines.push(`  ${item}`);
    if (items.length > LIST_LIMIT) lines.push(`  … and ${items.length - LIST_LIMIT} more`);
  };
  list('drifted', r.drifted);
  list('gone', r.goneAddresses);
  list(
    'failed',
    r.failures.map((f) => `${f.address}: ${f.message}`),
  );
  if (r.drifted.length > LIST_LIMIT) lines.push(`all drift: kl drift ${r.state}`);
  return lines.join('\n') + '\n';
}

/** A TTY-only progress bar on stderr, started once the total is known. */
class ProgressBar {
  private readonly bar = new SingleBar({
    format: 'refresh [{bar}] {value}/{total} {address}',
    stream: process.stderr,
    hideCursor: true,
    clearOnComplete: true,
    barsize: 30,
  });
  private started = false;

  update(p: RefreshProgress): void {
    if (!this.started) {
      this.bar.start(p.total, p.done, { address: '' });
      this.started = true;
      return;
    }
    // An instance key is anyone's text.
    this.bar.update(p.done, { address: visible(p.address ?? '') });
  }

  stop(): void {
    if (this.started) this.bar.stop();
    this.started = false;
  }
}
