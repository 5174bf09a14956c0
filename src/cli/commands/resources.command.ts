import { Command } from 'commander';
import { contextOf } from './context';

/** `kl resources <state>`: the instances alive now, optionally by address glob. */
export function registerResourcesCommand(program: Command): void {
  program
    .command('resources')
    .description('list the instances of a state')
    .argument('<state>', 'state name')
    .option(
      '--address-glob <glob>',
      "only addresses matching, e.g. 'module.net.*' (* any run, ? one char)",
    )
    .action(async (state: string, options: { addressGlob?: string }, command: Command) => {
      const { client, print } = contextOf(command);
      const resources = await client.resources(state, options.addressGlob);
      print({
        columns: ['address', 'type', 'module', 'provider', 'status', 'since_serial'],
        rows: resources.map((r) => [
          r.address,
          r.type,
          r.module === '' ? null : r.module,
          r.provider,
          r.status,
          r.sinceSerial,
        ]),
      });
    });
}
