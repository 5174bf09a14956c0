#!/usr/bin/env node
import 'reflect-metadata';
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import { Config, loadConfig } from './infrastructure/config/config';
import { describeConfig, effectiveEnvironment } from './infrastructure/config/config-file';
import { createLogger, Logger } from './infrastructure/logging/logger';
import { Database } from './infrastructure/postgres/database';
import { EmbeddedPostgresInUseError } from './infrastructure/postgres/embedded-postgres';
import { migrate } from './infrastructure/postgres/migrator';
import { ServerRunningError, withoutServer } from './infrastructure/postgres/serving-lock';
import { redactUrls } from './infrastructure/logging/redact';
import { ownConnection, rebuildWitnessed } from './infrastructure/postgres/unlogged-read-models';
import { openDatabase, openMaintenance, startServer } from './app/server';
import { boundHeapGrowth } from './app/heap-growth';
import { armExitWatchdog } from './app/exit-watchdog';
import { NestFactory } from '@nestjs/core';
import { CommandBus } from '@nestjs/cqrs';
import { TokenAdminModule } from './app/kilolock.module';
import { CreateTokenCommand } from './application/auth/token-commands';
import { expiryFrom } from './infrastructure/auth/expiry';
import { NestLogger } from './infrastructure/logging/nest-logger';
import { Notifier } from './infrastructure/postgres/notifier';
import type { ProjectionRunner } from './projections/projection-runner';
import { DomainError } from './domain/shared/domain-error';

const SHUTDOWN_DEADLINE_MS = 9_000;
const DUPLICATE_SIGNAL_MS = 1_000;

/** `--config <file>`, given before or after the command. */
let configFile: string | undefined;

/** The configuration: defaults < config file < environment < flags. */
function configuration(flags: { listen?: string } = {}): Config {
  return loadConfig(effectiveEnvironment(process.env, configFile).env, flags);
}

async function serve(opts: { listen?: string }): Promise<void> {
  boundHeapGrowth();
  const config = configuration(opts);
  const logger = loggerFor(config, 'stdout');
  const server = await startServer(config, logger);
  let stoppingSince: number | null = null;
  const stop = (signal: string) => {
    if (stoppingSince !== null) {
      // One Ctrl-C or supervisor stop often arrives twice: sent to the whole
      // process group and forwarded again by `npm start`. Only a later one
      // means "now".
      if (Date.now() - stoppingSince < DUPLICATE_SIGNAL_MS) return;
      logger.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    stoppingSince = Date.now();
    logger.info({ signal }, 'shutting down');
    const force = setTimeout(() => {
      logger.error('shutdown took too long; exiting');
      process.exit(1);
    }, SHUTDOWN_DEADLINE_MS);
    force.unref();
    server.close().then(
      () => {
        logger.info('stopped');
        process.exit(0);
      },
      (err) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

/** For one-shot commands: the database (embedded or not), migrated, then released. */
async function withDatabase<T>(
  config: Config,
  logger: Logger,
  fn: (db: Database, url: string) => Promise<T>,
): Promise<T> {
  const { url, embedded } = await openDatabase(config, logger);
  try {
    await migrate(url, logger);
    const db = new Database(url);
    try {
      return await fn(db, url);
    } finally {
      await db.close();
    }
  } finally {
    await embedded?.stop();
  }
}

/** The projection runner of every read model, not started (nothing is served). */
async function withRunner<T>(
  config: Config,
  logger: Logger,
  db: Database,
  url: string,
  fn: (runner: ProjectionRunner) => Promise<T>,
): Promise<T> {
  const notifier = new Notifier(url);
  try {
    const maintenance = await openMaintenance({ config, logger, db, notifier });
    try {
      return await fn(maintenance.runner);
    } finally {
      await maintenance.close();
    }
  } finally {
    await notifier.close();
  }
}

const REBUILD_ON_SERVER =
  'rebuild through it instead: kl projections rebuild (POST /v1/admin/projections/rebuild)';

/** Offline rebuild; a running server (embedded or on KL_DATABASE_URL) must do it itself. */
async function rebuildProjections(config: Config, logger: Logger): Promise<void> {
  try {
    await withDatabase(config, logger, (db, url) =>
      withoutServer(url, REBUILD_ON_SERVER, () =>
        withRunner(config, logger, db, url, async (runner) => {
          // Also after a crash emptied the UNLOGGED read models: the marker
          // written, the next `serve` finds them whole and does not rebuild again.
          const witness = await ownConnection(url);
          try {
            for (const r of await rebuildWitnessed(witness, () => runner.rebuild())) {
              process.stdout.write(`${r.projector}: ${r.events} events replayed\n`);
            }
          } finally {
            await witness.end().catch(() => undefined);
          }
        }),
      ),
    );
  } catch (err) {
    if (err instanceof EmbeddedPostgresInUseError) {
      throw new ServerRunningError(`${err.message}; ${REBUILD_ON_SERVER}`);
    }
    throw err;
  }
}

const SKIP_ON_SERVER =
  'skip through it instead: POST /v1/admin/projections/skip (docs/operations.md)';

/** Records a skip; next to a running server too (it wakes that server's halted projectors). */
async function skipEvent(
  config: Config,
  logger: Logger,
  projector: string,
  position: bigint,
  reason: string,
): Promise<void> {
  try {
    await withDatabase(config, logger, (db, url) =>
      withRunner(config, logger, db, url, async (runner) => {
        const skipped = await runner.skip(projector, position, reason);
        process.stdout.write(
          `${skipped.projector} will skip event ${skipped.position} ` +
            `(${skipped.type} on stream ${skipped.stream})\n`,
        );
      }),
    );
  } catch (err) {
    if (err instanceof EmbeddedPostgresInUseError) {
      throw new ServerRunningError(`${err.message}; ${SKIP_ON_SERVER}`);
    }
    throw err;
  }
}

const TOKEN_ON_SERVER =
  'create it through the server instead: kl token create (needs an admin token)';

/** Bootstrap: a token written straight to the database, before any token can call the API. */
async function createToken(
  config: Config,
  logger: Logger,
  opts: { name: string; scope: string[]; expires?: string; certSubject?: string },
): Promise<void> {
  try {
    await withDatabase(config, logger, async (db, url) => {
      const notifier = new Notifier(url);
      try {
        const context = await NestFactory.createApplicationContext(
          TokenAdminModule.forRuntime({ config, logger, db, notifier }),
          { logger: new NestLogger(logger), abortOnError: false },
        );
        try {
          const created = await context.get(CommandBus).execute(
            new CreateTokenCommand({
              name: opts.name,
              scopes: opts.scope,
              expiresAt: opts.expires === undefined ? null : expiryFrom(opts.expires, new Date()),
              certSubject: opts.certSubject ?? null,
              caller: { actor: 'kld token create', correlationId: 'kld-token-create' },
            }),
          );
          const what =
            created.certSubject === null
              ? 'token'
              : `identity for certificate "${created.certSubject}"`;
          process.stderr.write(
            `kld: ${what} "${created.name}" created with scopes ${created.scopes.join(' ')}` +
              `${created.expiresAt ? `, expiring ${created.expiresAt}` : ''}` +
              `${created.secret ? '; the secret below is shown only now' : ''}\n`,
          );
          if (created.secret) process.stdout.write(`${created.secret}\n`);
        } finally {
          await context.close();
        }
      } finally {
        await notifier.close();
      }
    });
  } catch (err) {
    if (err instanceof EmbeddedPostgresInUseError) {
      throw new ServerRunningError(`${err.message}; ${TOKEN_ON_SERVER}`);
    }
    throw err;
  }
}

async function main(argv: string[]): Promise<void> {
  const program = new Command('kld')
    .description('Kilolock server: Terraform state backend and event-sourced state store')
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
    .action(serve);

  program
    .command('config')
    .description('print the effective configuration (URL passwords masked) and exit')
    .action(() => {
      const effective = effectiveEnvironment(process.env, configFile);
      loadConfig(effective.env); // the same validation kld serve does
      process.stdout.write(describeConfig(effective, configFile));
    });

  program
    .command('migrate')
    .description('apply pending database migrations and exit')
    .action(async () => {
      const config = configuration();
      await withDatabase(config, loggerFor(config), async () => undefined);
    });

  const projections = program.command('projections').description('manage read-model projections');
  projections
    .command('rebuild')
    .description('replay the event log into fresh read models and swap them in (no server running)')
    .action(async () => {
      const config = configuration();
      await rebuildProjections(config, loggerFor(config));
    });
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
    .action(async (projector: string, position: bigint, opts: { reason: string }) => {
      const config = configuration();
      await skipEvent(config, loggerFor(config), projector, position, opts.reason);
    });

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
      async (opts: { name: string; scope?: string[]; expires?: string; certSubject?: string }) => {
        const config = configuration();
        await createToken(config, loggerFor(config), { ...opts, scope: opts.scope ?? [] });
      },
    );

  await program.parseAsync(argv);
}

/** `token create`: the command's name under kld. */
function commandPath(command: Command): string {
  const names: string[] = [];
  for (let c: Command | null = command; c?.parent; c = c.parent) names.unshift(c.name());
  return names.join(' ');
}

/** The server logs to stdout; the other commands to stderr, their stdout being their answer. */
function loggerFor(config: Config, to: 'stdout' | 'stderr' = 'stderr'): Logger {
  return createLogger(config.logLevel, config.logFormat, to);
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
