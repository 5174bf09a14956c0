import { Command } from 'commander';
import * as fs from 'node:fs';
import { KlError } from '../cli-error';
import { contextOf, integerOption } from './context';

/** `kl export <state>`: the document byte for byte as terraform's GET serves it. */
export function registerExportCommand(program: Command): void {
  program
    .command('export')
    .description('write a state document (current, or --serial N) to stdout or a file')
    .argument('<state>', 'state name')
    .option('--serial <n>', 'the newest version with this terraform serial')
    .option('-o, --output <file>', 'write to this file instead of stdout')
    .action(
      async (state: string, options: { serial?: string; output?: string }, command: Command) => {
        const serial = integerOption(command, options.serial, '--serial');
        const { client } = contextOf(command);
        const text = await client.exportState(state, serial);
        if (text === null) {
          throw new KlError(
            serial === undefined
              ? `state "${state}" does not exist or has no version yet`
              : `state "${state}" has no version with serial ${serial}`,
          );
        }
        if (options.output) fs.writeFileSync(options.output, text);
        else process.stdout.write(text);
      },
    );
}
