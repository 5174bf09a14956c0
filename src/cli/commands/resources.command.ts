import { Command } from 'commander';
import { contextOf, selectedVersion, VersionFlags, versionFlags } from './context';

/** `kl resources <state>`: the instances alive now (or at one version), optionally by address glob. */
export function registerResourcesCommand(program: Command): void {
  versionFlags(
    program
      .command('resources')
      .description('list the instances of a state (now, or at one version)')
      .argument('<state>', 'state name'),
  )
    .option(
      '--address-glob <glob>',
      "only addresses matching, e.g. 'module.net.*' (* any run, ? one char)",
    )
    .action(
      async (state: string, options: VersionFlags & { addressGlob?: string }, command: Command) => {
        const { client, print } = contextOf(command);
        const version = await selectedVersion(command, client, state, options);
        const resources = await client.resources(state, options.addressGlob, version);
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
      },
    );
}
