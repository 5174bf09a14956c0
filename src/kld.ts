#!/usr/bin/env node
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import { armExitWatchdog } from './app/exit-watchdog';
import { DomainError } from './domain/shared/domain-error';
import { redactUrls } from './infrastructure/logging/redact';
import { packageVersion } from './infrastructure/package-root';

/*
 * The command line alone: commander and nothing of the server. Each action
 * loads its command's module (src/app/kld/) when it runs, as kl loads only
 * the command it runs (src/cli/commands/index.ts): `kld --help`, a usage
 * error or `kld config` never load Nest or pg, and only `kld serve` loads
 * the HTTP app (test/e2e/kld-startup.e2e-spec.ts, bench/cli-startup.ts).
 */

/** `--config <file>`, given before or after the command. */
let configFile: string | undefined;

async function main(argv: string[]): Promise<void> {
  const program = new Command('kld')
    .description('Kilolock server: Terraform state backend and event-sourced state store')
    .version(packageVersion(), '-V, --version', 'print the kld version')
    .exitOverride()
    .configureOutput({ outputError: (str, write) => write(str) })
    .option(
      '--config <file>',
      'read settings from this YAML file (KL_* names); the environment overrides it',
    )
    .hook('preAction', (command) => {
      configFile = command.opts<{ config?: string }>().config;
    })
    .hook('postAction', (_, action) => {
      // `serve` runs on; every other command is done once its action is.
      if (action.name() !== 'serve') armExitWatchdog(commandPath(action));
    });

  program
    .command('serve')
    .description('run the HTTP server (embedded PostgreSQL unless KL_DATABASE_URL is set)')
    .option('--listen <host:port>', 'address to listen on (default KL_LISTEN or 127.0.0.1:8080)')
    .action(async (opts: { listen?: string }) =>
      (await import('./app/kld/serve')).serve(configFile, opts),
    );

  program
    .command('config')
    .description('print the effective configuration (URL passwords masked) and exit')
    .action(async () => (await import('./app/kld/config')).printConfig(configFile));

  program
    .command('migrate')
    .description('apply pending database migrations and exit')
    .action(async () => (await import('./app/kld/migrate')).migrateDatabase(configFile));

  const projections = program.command('projections').description('manage read-model projections');
  projections
    .command('rebuild')
    .description('replay the event log into fresh read models and swap them in (no server running)')
    .action(async () => (await import('./app/kld/projections')).rebuildProjections(configFile));
  projections
    .command('skip')
    .description('let a projector pass over an event it cannot apply (docs/operations.md)')
    .argument('<projector>', 'projector name, as /readyz reports it')
    .argument('<position>', 'the event position (event_log.position)', (value: string) => {
      if (!/^[1-9]\d{0,18}$/.test(value)) {
        throw new InvalidArgumentError('a positive integer (event_log.position) is expected');
      }
      return BigInt(value);
    })
    .requiredOption('--reason <text>', 'why the event is skipped (kept with the skip)')
    .action(async (projector: string, position: bigint, opts: { reason: string }) =>
      (await import('./app/kld/projections')).skipEvent(
        configFile,
        projector,
        position,
        opts.reason,
      ),
    );

  const token = program.command('token').description('manage API tokens (docs/security.md)');
  token
    .command('create')
    .description('create a token in the database directly (bootstrap); prints its secret once')
    .requiredOption('--name <name>', "the token's name: the actor on everything it does")
    .option(
      '--scope <scope...>',
      'read:GLOB, write:GLOB, admin, query, events or metrics (repeatable)',
      (value: string, prev: string[] = []) => [...prev, value],
    )
    .option('--expires <when>', 'a duration (90d) or a date (2027-01-31)')
    .option('--cert-subject <subject>', 'a client certificate subject (CN=ci) instead of a secret')
    .action(
      async (opts: { name: string; scope?: string[]; expires?: string; certSubject?: string }) =>
        (await import('./app/kld/token-create')).createToken(configFile, {
          ...opts,
          scope: opts.scope ?? [],
        }),
    );

  await program.parseAsync(argv);
}

/** `token create`: the command's name under kld. */
function commandPath(command: Command): string {
  const names: string[] = [];
  for (let c: Command | null = command; c?.parent; c = c.parent) names.unshift(c.name());
  return names.join(' ');
}

main(process.argv).catch((err: unknown) => {
  if (err instanceof CommanderError) process.exit(err.exitCode === 0 ? 0 : 2);
  // Ours (a bad variable, a migration, a server in the way…): exit 2 and no stack.
  const known = err instanceof DomainError;
  const message = err instanceof Error ? err.message : String(err);
  process.stderr.write(`kld: ${redactUrls(message)}\n`);
  if (!known && process.env.KL_DEBUG) {
    process.stderr.write(`${redactUrls(String((err as Error).stack))}\n`);
  }
  process.exit(known ? 2 : 1);
});
