import { Command } from 'commander';
import * as fs from 'node:fs';
import { terminalSafeJson } from '../terminal-text';
import { contextOf, selectedVersion, VersionFlags, versionFlags } from './context';

/**
 * `kl export <state>`: the document byte for byte as terraform's GET serves it;
 * on a terminal, control characters in it as JSON escapes (the same document).
 */
export function registerExportCommand(program: Command): void {
  versionFlags(
    program
      .command('export')
      .description('write a state document (current, or one version) to stdout or a file')
      .argument('<state>', 'state name'),
  )
    .option('-o, --output <file>', 'write to this file instead of stdout')
    .action(
      async (state: string, options: VersionFlags & { output?: string }, command: Command) => {
        const { client } = contextOf(command);
        const version = await selectedVersion(command, client, state, options);
        const { bytes } = await client.exportState(state, version);
        if (options.output) fs.writeFileSync(options.output, bytes);
        else if (process.stdout.isTTY)
          process.stdout.write(terminalSafeJson(bytes.toString('utf8')));
        else process.stdout.write(bytes);
      },
    );
}
