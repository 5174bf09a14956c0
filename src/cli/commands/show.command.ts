import { Command } from 'commander';
import { SENSITIVE_MASK } from '../../domain/cty/mask-sensitive';
import { DomainError } from '../../domain/shared/domain-error';
import {
  flattenInstances,
  JsonValue,
  parseStateDocument,
  StateDocumentV4,
} from '../../domain/terraform';
import { render, renderJson } from '../render';
import { contextOf, selectedVersion, VersionFlags, versionFlags } from './context';

interface ShowOptions extends VersionFlags {
  showSensitive?: boolean;
}

/**
 * `kl show <state>`: a state for people — its version, serial, lineage and
 * outputs (sensitive ones masked), then its instances. `kl export` gives the
 * document itself. As csv, only the instances (one row each).
 */
export function registerShowCommand(program: Command): void {
  versionFlags(
    program
      .command('show')
      .description('show a state: version, serial, lineage, outputs and instances')
      .argument('<state>', 'state name'),
  )
    .option('--show-sensitive', 'show sensitive output values instead of masking them')
    .action(async (state: string, options: ShowOptions, command: Command) => {
      const { client, format } = contextOf(command);
      const selected = await selectedVersion(command, client, state, options);
      const { bytes, version } = await client.exportState(state, selected, true);
      // Parsed losslessly: numbers beyond double precision print as written.
      let document: StateDocumentV4;
      try {
        document = parseStateDocument(bytes.toString('utf8'));
      } catch (err) {
        throw new DomainError(
          'SERVER.UNEXPECTED_ANSWER',
          `kld's answer to GET /v1/states/${state} is not a state document (${(err as Error).message})`,
        );
      }
      const outputs = Object.entries(document.outputs).map(([name, o]) => ({
        name,
        type: o.type ?? null,
        sensitive: o.sensitive === true,
        value: o.sensitive === true && !options.showSensitive ? SENSITIVE_MASK : o.value,
      }));
      // No hashing: only the addresses are shown.
      const instances = flattenInstances(document, () => '').map((i) => ({
        address: i.address,
        type: i.resource.type,
        provider: i.resource.provider,
        status: i.instance.status ?? null,
      }));
      const instanceRows = {
        columns: ['address', 'type', 'provider', 'status'],
        rows: instances.map((i) => [i.address, i.type, i.provider, i.status]),
      };
      if (format === 'csv') {
        process.stdout.write(render(instanceRows, 'csv'));
        return;
      }
      if (format === 'json') {
        process.stdout.write(
          renderJson({
            state,
            version,
            serial: document.serial,
            lineage: document.lineage,
            terraform_version: document.terraform_version,
            outputs: Object.fromEntries(
              outputs.map(({ name, ...o }) => [name, o as Record<string, JsonValue>]),
            ),
            instances,
          }),
        );
        return;
      }
      process.stdout.write(
        [
          render(
            {
              columns: ['field', 'value'],
              rows: [
                ['state', state],
                ['version', version],
                ['serial', document.serial],
                ['lineage', document.lineage],
                ['terraform_version', document.terraform_version],
              ],
            },
            'table',
          ),
          render(
            {
              columns: ['output', 'type', 'value'],
              rows: outputs.map((o) => [o.name, o.type, o.value]),
            },
            'table',
          ),
          render(instanceRows, 'table'),
        ].join('\n'),
      );
    });
}
