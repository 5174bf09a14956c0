#!/usr/bin/env node
import 'reflect-metadata';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { registerStateCommands } from './commands';
import { registerApplyAbortCommand } from './commands/apply-abort.command';
import { registerDriftCommand } from './commands/drift.command';
import { registerProviderConfigCommands } from './commands/provider-config.command';
import { registerRefreshCommand } from './commands/refresh.command';
import { registerPlanCommand } from './commands/plan.command';
import { registerApplyCommand } from './commands/apply.command';
import { registerProviderSchemaCommand } from './commands/provider-schema.command';
import { registerVersionCommand } from './commands/version.command';
import { registerTokenCommand } from './commands/token.command';
import { registerBackendConfigCommand } from './commands/backend-config.command';
import { registerQuotaCommand } from './commands/quota.command';
import { registerStateEngineCommands } from './commands/state-engine.command';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { version } = require('../../../package.json') as { version: string };

/** Global options every command can read with `program.opts()`. */
export interface GlobalOptions {
  server: string;
  token?: string;
  format: 'table' | 'json' | 'csv';
}

export function buildProgram(): Command {
  const program = new Command('kl')
    .description('Kilolock CLI: query and operate Terraform states held by kld')
    .addOption(
      new Option('--server <url>', 'kld base URL')
        .env('KL_SERVER_URL')
        .default('http://127.0.0.1:8080')
        .argParser(serverUrl),
    )
    .option('--token <token>', 'API token (default: KL_TOKEN)', process.env.KL_TOKEN)
    .option(
      '--state-url <url>',
      'the state: https://kld/v1/states/<name> (default: KL_STATE_URL, .kl.toml, backend "http")',
    )
    .option(
      '--protocol <protocol>',
      'http | state-engine | auto (default: KL_PROTOCOL, .kl.toml, auto)',
    )
    .addOption(
      new Option('--format <format>', 'output format')
        .choices(['table', 'json', 'csv'])
        .default('table'),
    )
    .exitOverride()
    .showHelpAfterError(false)
    // Usage errors in the same one-line shape as every other failure.
    .configureOutput({ outputError: (str, write) => write(`kl: ${str.replace(/^error: /, '')}`) });

  registerVersionCommand(program, version);

  registerStateCommands(program);
  registerProviderSchemaCommand(program);
  registerProviderConfigCommands(program);
  registerRefreshCommand(program);
  registerDriftCommand(program);
  registerPlanCommand(program);
  registerApplyCommand(program);
  registerStateEngineCommands(program);
  // After `kl apply` itself: abort is one of its subcommands.
  registerApplyAbortCommand(program);
  registerTokenCommand(program);
  registerBackendConfigCommand(program);
  registerQuotaCommand(program);
  return program;
}

/** Checked where it is given, so every command (and KL_SERVER_URL) fails the same way. */
function serverUrl(value: string): string {
  let protocol: string | null = null;
  try {
    protocol = new URL(value).protocol;
  } catch {
    // not a URL at all
  }
  if (protocol !== 'http:' && protocol !== 'https:') {
    throw new InvalidArgumentError('expected an http(s) URL such as http://127.0.0.1:8080');
  }
  return value;
}

async function main(argv: string[]): Promise<void> {
  await buildProgram().parseAsync(argv);
}

main(process.argv).catch((err: unknown) => {
  if (err instanceof CommanderError) {
    // Commander already printed the message; help and version exit 0;
    // `kl plan`/`kl apply` usage errors exit 3 (ADR 0007), every other 2.
    process.exit(err.exitCode === 0 ? 0 : err.exitCode === 3 ? 3 : 2);
  }
  // One line, never a stack: the first line of the message is the message.
  const message = err instanceof Error ? err.message : String(err);
  process.stderr.write(`kl: ${message.split('\n')[0]}\n`);
  process.exit(1);
});
