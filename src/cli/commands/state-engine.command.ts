import { Command } from 'commander';
import {
  NativeChange,
  rollbackResource,
  sliceInstances,
  stateMv,
  stateRm,
} from '../../domain/state-engine/native-ops';
import { parseAddressGlob } from '../../domain/reservations/address-glob';
import { KlError } from '../cli-error';
import { EngineCandidates, KilolockClient } from '../kilolock-client';
import { loadKlConfig } from '../kl-config';
import { visible } from '../terminal-text';
import { redactUrls } from '../../infrastructure/logging/redact';
import { commitUpserts } from '../../infrastructure/rest/commit-upserts';
import { integerOption, selectedVersion } from './context';

interface Target {
  client: KilolockClient;
  state: string;
}

/**
 * The state the command works on: `--state NAME` on `--server`, or the
 * resolved state_url (flag, KL_STATE_URL, .kl.toml, backend "http").
 */
export function targetOf(command: Command): Target {
  const opts = command.optsWithGlobals<{ state?: string; server: string; token?: string }>();
  const config = loadKlConfig(command);
  const token = config.token.value ?? undefined;
  if (opts.state !== undefined) {
    return { client: new KilolockClient(opts.server, token), state: opts.state };
  }
  if (config.server === null || config.state === null) {
    throw new KlError(
      'CONFIG.INVALID',
      'no state to work on: give --state NAME, --state-url, KL_STATE_URL, state_url in .kl.toml, ' +
        'or run in a terraform directory with a backend "http" block',
    );
  }
  return { client: new KilolockClient(config.server, token), state: config.state };
}

/** Candidates for a slice: module paths as prefixes, the rest as addresses. */
function candidatesFor(addresses: string[]): EngineCandidates {
  const modules: string[] = [];
  const resources: string[] = [];
  for (const a of addresses) {
    let glob;
    try {
      glob = parseAddressGlob(a);
    } catch (err) {
      throw new KlError('REQUEST.INVALID', (err as Error).message);
    }
    (glob.resource === null ? modules : resources).push(a);
  }
  return {
    ...(resources.length ? { addresses: resources } : {}),
    ...(modules.length ? { module_prefixes: modules } : {}),
  };
}

/**
 * Runs a native operation on the state-engine lane: print the exact change;
 * unless a dry run, reserve the touched resources (which also holds off
 * terraform), commit the change as one delta on the version it was
 * computed from, and release. A refused commit stores nothing.
 */
async function runNative(
  t: Target,
  operation: string,
  info: Record<string, unknown>,
  baseVersion: number,
  terraformVersion: string,
  change: NativeChange,
  dryRun: boolean,
): Promise<void> {
  const out = process.stdout;
  out.write(`${operation} on ${t.state} (version ${baseVersion}):\n`);
  for (const line of change.preview) out.write(`  ${line}\n`);
  if (dryRun) {
    out.write('dry run: nothing changed\n');
    return;
  }
  const run = await t.client.engineStartRun(t.state, {
    operation,
    base_version: baseVersion,
    write: change.touched,
    info: { ...info, preview: change.preview },
  });
  let committed: { version: number; serial: number };
  try {
    committed = await t.client.engineCommit(t.state, run.run_id, {
      base_version: baseVersion,
      terraform_version: terraformVersion,
      upserts: commitUpserts(change.upserts),
      deletes: change.deletes,
    });
  } catch (err) {
    const status = (err as { code?: string }).code === 'APPLY.STALE' ? 'conflict' : 'failed';
    await t.client
      .engineFinish(t.state, run.run_id, status, (err as Error).message.slice(0, 2000))
      .catch(() => undefined);
    throw err;
  }
  out.write(
    `${operation}: committed version ${committed.version} (serial ${committed.serial}), run ${run.run_id}\n`,
  );
}

/** `kl state rm|mv`. */
export function registerStateCommand(program: Command): void {
  const state = program
    .command('state')
    .description('native state operations on the state-engine lane (docs/state-engine.md)');

  state
    .command('rm')
    .description('remove resources, instances or whole modules from the state')
    .argument('<address...>', 'resource, instance or module addresses')
    .option('--state <name>', 'state name (default: the resolved state_url; see kl config)')
    .option('--dry-run', 'print the change and do nothing')
    .action(async (addresses: string[], o: { dryRun?: boolean }, command: Command) => {
      const t = targetOf(command);
      const slice = await t.client.engineSlice(t.state, candidatesFor(addresses));
      const change = stateRm(addresses, sliceInstances(slice.document));
      await runNative(
        t,
        'state rm',
        { addresses },
        slice.version,
        slice.document.terraform_version,
        change,
        o.dryRun === true,
      );
    });

  state
    .command('mv')
    .description(
      'move a resource, an instance or a whole module to a new address (never overwrites)',
    )
    .argument('<from>', 'source address')
    .argument('<to>', 'destination address')
    .option('--state <name>', 'state name (default: the resolved state_url; see kl config)')
    .option('--dry-run', 'print the change and do nothing')
    .action(async (from: string, to: string, o: { dryRun?: boolean }, command: Command) => {
      const t = targetOf(command);
      const source = await t.client.engineSlice(t.state, candidatesFor([from]));
      const dest = await t.client.engineSlice(t.state, {
        ...candidatesFor([to]),
        version: source.version,
      });
      const change = stateMv(
        from,
        to,
        sliceInstances(source.document),
        sliceInstances(dest.document),
      );
      await runNative(
        t,
        'state mv',
        { from, to },
        source.version,
        source.document.terraform_version,
        change,
        o.dryRun === true,
      );
    });
}

/** `kl rollback resource`. */
export function registerRollbackCommand(program: Command): void {
  const rollback = program
    .command('rollback')
    .description('restore part of a state as it was, as a new version');
  rollback
    .command('resource')
    .description("restore a resource's instances as they were at a serial")
    .argument('<address>', 'resource or instance address')
    .requiredOption('--to-serial <n>', 'the terraform serial to restore from')
    .option('--state <name>', 'state name (default: the resolved state_url; see kl config)')
    .option('--dry-run', 'print the change and do nothing')
    .action(
      async (address: string, o: { toSerial: string; dryRun?: boolean }, command: Command) => {
        const t = targetOf(command);
        const serial = integerOption(command, o.toSerial, '--to-serial')!;
        const version = (await selectedVersion(command, t.client, t.state, {
          serial: o.toSerial,
        }))!;
        const candidates = candidatesFor([address]);
        const past = await t.client.engineSlice(t.state, { ...candidates, version });
        const now = await t.client.engineSlice(t.state, candidates);
        const change = rollbackResource(
          address,
          serial,
          sliceInstances(past.document),
          sliceInstances(now.document),
        );
        await runNative(
          t,
          'rollback resource',
          { address, to_serial: serial, from_version: version },
          now.version,
          now.document.terraform_version,
          change,
          o.dryRun === true,
        );
      },
    );
}

/** `kl config`. */
export function registerConfigCommand(program: Command): void {
  program
    .command('config')
    .description('print where kl finds the state and how it talks to it, and where each came from')
    .action((_o: unknown, command: Command) => {
      const c = loadKlConfig(command);
      // Read from local files and the environment: a password in a URL is masked.
      const row = (key: string, value: string, source: string, from?: string) =>
        process.stdout.write(
          visible(
            redactUrls(
              `${key.padEnd(10)} ${value.padEnd(48)} ${source}${from ? ` (${from})` : ''}`,
            ),
          ) + '\n',
        );
      row('state_url', c.stateUrl.value ?? '-', c.stateUrl.source, c.stateUrl.from);
      row('server', c.server ?? '-', c.stateUrl.source, c.stateUrl.from);
      row('state', c.state ?? '-', c.stateUrl.source, c.stateUrl.from);
      row('protocol', c.protocol.value, c.protocol.source, c.protocol.from);
      row('token', c.token.value === null ? '-' : '(set)', c.token.source, c.token.from);
    });
}
