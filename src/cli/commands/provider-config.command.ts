import { Command } from 'commander';
import * as fs from 'node:fs';
import { isJsonObject, JsonObject, parseJsonLossless } from '../../domain/terraform';
import { normaliseProviderSource } from '../../infrastructure/provider/provider-address';
import { KldHttpClient } from '../../infrastructure/rest/kld-http-client';
import { RestRefreshServer } from '../../infrastructure/refresh/rest-refresh-server';
import { Format, render, renderJson, Rows } from '../render';
import { KlError } from '../cli-error';
import { usage } from './context';

interface Globals {
  server: string;
  token?: string;
  format: Format;
}

interface AliasOptions {
  alias?: string;
}

/**
 * `kl provider configure|list|get|remove`: the config `kl refresh` passes to
 * each provider's Configure, stored per state. Secrets are written as
 * `{"env": "NAME"}` and resolved on the machine that runs the refresh.
 */
export function registerProviderConfigCommands(program: Command): void {
  const provider =
    program.commands.find((c) => c.name() === 'provider') ??
    program.command('provider').description('inspect Terraform provider plugins');

  provider
    .command('configure')
    .description('store the config refresh passes to a provider (replaces any stored one)')
    .argument('<state>', 'state name')
    .argument('<source>', 'provider source, e.g. hashicorp/aws')
    .option('--alias <alias>', 'the aliased provider configuration (provider "aws" { alias = … })')
    .requiredOption('--from-json <file>', 'a JSON object of provider arguments; "-" reads stdin')
    .option(
      '--no-schema-check',
      "store it even if a provider schema kld has seen does not know a key (e.g. a newer provider's)",
    )
    .addHelpText(
      'after',
      '\nSecrets never go into the file: write {"env": "NAME"} and set NAME where kl refresh runs, e.g.\n' +
        '  {"region": "eu-west-1", "access_key": {"env": "AWS_ACCESS_KEY_ID"}, "secret_key": {"env": "AWS_SECRET_ACCESS_KEY"}}',
    )
    .action(
      async (
        state: string,
        source: string,
        options: AliasOptions & { fromJson: string; schemaCheck: boolean },
        command: Command,
      ) => {
        const config = readConfig(command, options.fromJson);
        const normalised = sourceOf(command, source);
        const { replaced } = await serverOf(command).putProviderConfig(
          state,
          normalised,
          options.alias ?? null,
          config,
          { checkSchema: options.schemaCheck },
        );
        const previous = replaced
          ? ` (replacing the one ${replaced.updated_by} stored at ${replaced.updated_at})`
          : '';
        process.stdout.write(
          `stored config of ${describe(normalised, options.alias)} for state ${state}${previous}\n`,
        );
      },
    );

  provider
    .command('list')
    .description('list the provider configs stored for a state')
    .argument('<state>', 'state name')
    .action(async (state: string, _options: unknown, command: Command) => {
      const configs = await serverOf(command).listProviderConfigs(state);
      print(command, {
        columns: ['source', 'alias', 'config', 'updated_at', 'updated_by'],
        rows: configs.map((c) => [c.source, c.alias, c.config, c.updated_at, c.updated_by]),
      });
    });

  provider
    .command('get')
    .description(
      'print a stored provider config and its history: who changed what, and when ' +
        '(--format json: {config, history, …}; its .config is the form configure --from-json takes)',
    )
    .argument('<state>', 'state name')
    .argument('<source>', 'provider source, e.g. hashicorp/aws')
    .option('--alias <alias>', 'the aliased provider configuration')
    .action(async (state: string, source: string, options: AliasOptions, command: Command) => {
      const normalised = sourceOf(command, source);
      const alias = options.alias ?? null;
      const server = serverOf(command);
      const stored = await server.providerConfig(state, normalised, alias);
      if (!stored) {
        throw new KlError(
          'PROVIDER_CONFIG.NOT_FOUND',
          `no config stored for ${describe(normalised, options.alias)} of state ${state}`,
        );
      }
      const history = await server.providerConfigHistory(state, normalised, alias);
      const format = command.optsWithGlobals<Globals>().format;
      if (format === 'json') {
        process.stdout.write(renderJson({ ...stored, history }));
        return;
      }
      const changes: Rows = {
        columns: ['at', 'actor', 'action', 'changed_paths'],
        rows: history.map((h) => [h.at, h.actor, h.action, h.changed_paths]),
      };
      if (format === 'csv') {
        process.stdout.write(
          render(
            {
              columns: [...changes.columns, 'config'],
              rows: history.map((h, i) => [...changes.rows[i], h.config]),
            },
            'csv',
          ),
        );
        return;
      }
      process.stdout.write(
        `${renderJson(stored.config)}\nhistory (oldest first):\n${render(changes, 'table')}`,
      );
    });

  provider
    .command('remove')
    .description(
      'delete a stored provider config (refresh then configures the provider with no arguments)',
    )
    .argument('<state>', 'state name')
    .argument('<source>', 'provider source, e.g. hashicorp/aws')
    .option('--alias <alias>', 'the aliased provider configuration')
    .action(async (state: string, source: string, options: AliasOptions, command: Command) => {
      const normalised = sourceOf(command, source);
      await serverOf(command).removeProviderConfig(state, normalised, options.alias ?? null);
      process.stdout.write(
        `removed config of ${describe(normalised, options.alias)} for state ${state}\n`,
      );
    });
}

function serverOf(command: Command): RestRefreshServer {
  const globals = command.optsWithGlobals<Globals>();
  return new RestRefreshServer(new KldHttpClient(globals.server, { token: globals.token }));
}

function print(command: Command, data: Parameters<typeof render>[0]): void {
  process.stdout.write(render(data, command.optsWithGlobals<Globals>().format));
}

function sourceOf(command: Command, source: string): string {
  try {
    return normaliseProviderSource(source);
  } catch (e) {
    return usage(command, (e as Error).message);
  }
}

function readConfig(command: Command, file: string): JsonObject {
  let text: string;
  try {
    text = fs.readFileSync(file === '-' ? 0 : file, 'utf8');
  } catch (e) {
    return usage(
      command,
      `cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
    );
  }
  let value: unknown;
  try {
    // Numbers beyond double precision are sent as written.
    value = parseJsonLossless(text);
  } catch (e) {
    return usage(command, `${file} is not JSON: ${(e as Error).message}`);
  }
  if (!isJsonObject(value))
    return usage(command, `${file} must hold a JSON object of provider arguments`);
  return value;
}

function describe(source: string, alias: string | undefined): string {
  return alias ? `provider ${source} (alias ${alias})` : `provider ${source}`;
}
