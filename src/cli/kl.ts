#!/usr/bin/env node
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { registerCommands } from './commands';
import { parseDuration } from './durations';
import { errorLine, visibleLines } from './terminal-text';

/** Global options every command can read with `program.opts()`. */
export interface GlobalOptions {
  server: string;
  token?: string;
  clientCert?: string;
  clientKey?: string;
  /** In seconds; 0 is no bound. */
  requestTimeout?: number;
  idleTimeout?: number;
  format: 'table' | 'json' | 'csv';
}

/** The program for `args` (argv without node and the script): only their command is loaded. */
export async function buildProgram(args: readonly string[]): Promise<Command> {
  const program = new Command('kl')
    .description('Kilolock CLI: query and operate Terraform states held by kld')
    .addOption(
      new Option('--server <url>', 'kld base URL')
        .env('KL_SERVER_URL')
        .default('http://127.0.0.1:8080')
        .argParser(serverUrl),
    )
    .option('--token <token>', 'API token (default: KL_TOKEN)', process.env.KL_TOKEN)
    .addOption(
      new Option('--client-cert <file>', 'PEM client certificate, for a kld that requires one').env(
        'KL_CLIENT_CERT',
      ),
    )
    .addOption(
      new Option('--client-key <file>', "the client certificate's PEM private key").env(
        'KL_CLIENT_KEY',
      ),
    )
    .addOption(
      new Option(
        '--request-timeout <duration>',
        'the most one request to kld may take, its answer read to the end: 90s, 15m, 1h; 0 for none (default 1h; never kl events --follow)',
      )
        .env('KL_REQUEST_TIMEOUT')
        .argParser(bound),
    )
    .addOption(
      new Option(
        '--idle-timeout <duration>',
        'how long kld may send nothing, before its answer or inside it; 0 for none (default 5m)',
      )
        .env('KL_IDLE_TIMEOUT')
        .argParser(bound),
    )
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
    .hook('preAction', async (_program, action) => {
      const { clientCert, clientKey, requestTimeout, idleTimeout } =
        action.optsWithGlobals<GlobalOptions>();
      if (requestTimeout !== undefined || idleTimeout !== undefined) {
        const { useRequestBounds } = await import('../infrastructure/rest/kld-http-client');
        useRequestBounds({
          ...(requestTimeout === undefined ? {} : { totalMs: requestTimeout * 1000 }),
          ...(idleTimeout === undefined ? {} : { idleMs: idleTimeout * 1000 }),
        });
      }
      // node:crypto is loaded only by a kl that presents a certificate.
      if (clientCert === undefined && clientKey === undefined) return;
      const { presentClientCertificate } =
        await import('../infrastructure/rest/client-certificate');
      presentClientCertificate({ cert: clientCert, key: clientKey });
    })
    .exitOverride()
    .showHelpAfterError(false)
    // Usage errors in the same one-line shape as every other failure.
    .configureOutput({
      outputError: (str, write) => write(`kl: ${visibleLines(str.replace(/^error: /, ''))}`),
    });

  await registerCommands(program, args);
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

/** A bound in seconds (`90`, `90s`, `15m`, `1h`); 0 is none. */
function bound(value: string): number {
  const seconds = parseDuration(value);
  if (seconds === null) {
    throw new InvalidArgumentError('expected a duration such as 90s, 15m or 1h (0 for none)');
  }
  return seconds;
}

async function main(argv: string[]): Promise<void> {
  const program = await buildProgram(argv.slice(2));
  await program.parseAsync(argv);
}

/**
 * The command is done: leave once what it wrote is out, rather than wait for
 * anything a command left behind (a provider's pipes, a timer).
 * `process.exitCode` set by a command still counts.
 */
function exitWhenWritten(): void {
  process.stdout.write('', () => process.stderr.write('', () => process.exit()));
}

main(process.argv).then(exitWhenWritten, (err: unknown) => {
  if (err instanceof CommanderError) {
    // Commander already printed the message; help and version exit 0;
    // `kl plan`/`kl apply` usage errors exit 3 (ADR 0007), every other 2.
    process.exit(err.exitCode === 0 ? 0 : err.exitCode === 3 ? 3 : 2);
  }
  // One line, never a stack: the first line of the message is the message.
  process.stderr.write(`kl: ${errorLine(err)}\n`);
  process.exit(1);
});
