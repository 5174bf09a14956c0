import { Command } from 'commander';
import { maskSensitive } from '../../domain/cty/mask-sensitive';
import { changedPaths } from '../../domain/terraform/changed-paths';
import type { JsonValue } from '../../domain/terraform';
import { KlError } from '../cli-error';
import { renderJson } from '../render';
import { contextOf, selectedVersion, VersionFlags, versionFlags } from './context';

interface ResourceOptions extends VersionFlags {
  history?: boolean;
  showSensitive?: boolean;
}

/**
 * `kl resource <state> <address>`: one instance, field by field, with the
 * values terraform marked sensitive masked as `terraform state show` does.
 * As json, one object. With `--history`, one row per lifecycle and which
 * attributes each one changed.
 */
export function registerResourceCommand(program: Command): void {
  versionFlags(
    program
      .command('resource')
      .description(
        'show one instance (now, or at one version), or with --history every version of it',
      )
      .argument('<state>', 'state name')
      .argument('<address>', 'instance address, e.g. \'module.app.aws_instance.web["a"]\''),
  )
    .option('--history', 'list every lifecycle of the instance, oldest first')
    .option('--show-sensitive', 'show sensitive attribute values instead of masking them')
    .action(async (state: string, address: string, options: ResourceOptions, command: Command) => {
      const { client, format, print } = contextOf(command);
      const version = await selectedVersion(command, client, state, options);
      const answer = await client.resource(state, address, options.history === true, version);
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
              : changedPaths(lifecycles[i - 1].attributes as JsonValue, l.attributes as JsonValue),
          ]),
        });
        return;
      }
      const r = answer.current;
      if (!r) throw new KlError('RESOURCE.NOT_FOUND', `state "${state}" no longer has ${address}`);
      const attributes = (r.attributes ?? {}) as Record<string, JsonValue>;
      const shown = options.showSensitive
        ? attributes
        : maskSensitive(attributes, r.sensitiveAttributes);
      const fields = {
        address: r.address,
        type: r.type,
        module: r.module,
        provider: r.provider,
        status: r.status,
        since_version: r.sinceVersion,
        since_serial: r.sinceSerial,
        dependencies: r.dependencies,
      };
      if (format === 'json') {
        process.stdout.write(renderJson({ ...fields, attributes: shown }));
        return;
      }
      print({
        columns: ['field', 'value'],
        rows: [
          ...Object.entries(fields),
          ...Object.entries(shown).map(([k, v]) => [`attributes.${k}`, v]),
        ],
      });
    });
}
