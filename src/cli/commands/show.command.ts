import { Command } from 'commander';
import { KlError } from '../cli-error';
import { flattenInstances, parseStateDocument } from '../../domain/terraform';
import { contextOf, integerOption } from './context';

/**
 * `kl show <state>`: the document terraform would GET. As json it is the
 * document itself; as table or csv, one row per instance.
 */
export function registerShowCommand(program: Command): void {
  program
    .command('show')
    .description('show a state (current, or the newest version with --serial)')
    .argument('<state>', 'state name')
    .option('--serial <n>', 'the newest version with this terraform serial')
    .action(async (state: string, options: { serial?: string }, command: Command) => {
      const serial = integerOption(command, options.serial, '--serial');
      const { client, format, print } = contextOf(command);
      const text = await client.exportState(state, serial);
      if (text === null) {
        throw new KlError(
          serial === undefined
            ? `state "${state}" does not exist or has no version yet`
            : `state "${state}" has no version with serial ${serial}`,
        );
      }
      const document = parseStateDocument(JSON.parse(text));
      if (format === 'json') {
        process.stdout.write(JSON.stringify(document, null, 2) + '\n');
        return;
      }
      print({
        columns: ['address', 'type', 'provider', 'status'],
        rows: flattenInstances(document).map((i) => [
          i.address,
          i.resource.type,
          i.resource.provider,
          i.instance.status ?? null,
        ]),
      });
    });
}
