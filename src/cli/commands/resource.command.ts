import { Command } from 'commander';
import { changedPaths } from '../../domain/terraform/changed-paths';
import type { JsonValue } from '../../domain/terraform';
import { KlError } from '../cli-error';
import { contextOf } from './context';

/**
 * `kl resource <state> <address>`: one instance, field by field. With
 * `--history`, one row per lifecycle and which attributes each one changed.
 */
export function registerResourceCommand(program: Command): void {
  program
    .command('resource')
    .description('show one instance, or with --history every version of it')
    .argument('<state>', 'state name')
    .argument('<address>', 'instance address, e.g. \'module.app.aws_instance.web["a"]\'')
    .option('--history', 'list every lifecycle of the instance, oldest first')
    .action(
      async (state: string, address: string, options: { history?: boolean }, command: Command) => {
        const { client, print } = contextOf(command);
        const answer = await client.resource(state, address, options.history === true);
        if (options.history) {
          const lifecycles = answer.history ?? [];
          print({
            columns: [
              'from_version',
              'from_serial',
              'until_version',
              'until_serial',
              'hash',
              'changed',
            ],
            rows: lifecycles.map((l, i) => [
              l.createVersion,
              l.createSerial,
              l.deleteVersion,
              l.deleteSerial,
              l.attributesHash.slice(0, 12),
              i === 0
                ? ['(created)']
                : changedPaths(
                    lifecycles[i - 1].attributes as JsonValue,
                    l.attributes as JsonValue,
                  ),
            ]),
          });
          return;
        }
        const r = answer.current;
        if (!r) throw new KlError(`state "${state}" no longer has ${address}`);
        print({
          columns: ['field', 'value'],
          rows: [
            ['address', r.address],
            ['type', r.type],
            ['module', r.module],
            ['provider', r.provider],
            ['status', r.status],
            ['since_serial', r.sinceSerial],
            ['dependencies', r.dependencies],
            ...Object.entries(r.attributes ?? {}).map(([k, v]) => [`attributes.${k}`, v]),
          ],
        });
      },
    );
}
