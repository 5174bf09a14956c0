import { Command } from 'commander';
import * as fs from 'node:fs';
import { KlError } from '../cli-error';
import { KilolockClient } from '../kilolock-client';
import { Format, render, Rows } from '../render';

interface Globals {
  server: string;
  token?: string;
  format: Format;
}

/** The client and output format a command runs with, from the global options. */
export function contextOf(command: Command): {
  client: KilolockClient;
  format: Format;
  print(data: Rows): void;
} {
  const globals = command.optsWithGlobals<Globals>();
  const format = globals.format;
  return {
    client: new KilolockClient(globals.server, globals.token),
    format,
    print: (data) => process.stdout.write(render(data, format)),
  };
}

/** A usage mistake commander cannot see (exit 2, like its own). */
export function usage(command: Command, message: string): never {
  command.error(message, { exitCode: 2, code: 'kl.usage' });
}

/** Parses a non-negative integer option, or stops with a usage error. */
export function integerOption(command: Command, value: string | undefined, name: string) {
  if (value === undefined) return undefined;
  if (!/^\d{1,15}$/.test(value))
    usage(command, `${name} must be a non-negative integer, got "${value}"`);
  return Number(value);
}

export function readFileOrStdin(path: string): string {
  return fs.readFileSync(path === '-' ? 0 : path, 'utf8');
}

/** The flags that pick one version of a state. */
export interface VersionFlags {
  serial?: string;
  version?: string;
}

/** Adds `--serial` and `--version` to a command that reads one version of a state. */
export function versionFlags(command: Command): Command {
  return command
    .option('--version <n>', 'our version number (1, 2, 3…; see kl history)')
    .option(
      '--serial <n>',
      'the newest version with this terraform serial (serials repeat after a forced push)',
    );
}

/**
 * The version `--version N` or `--serial N` names; undefined for the current
 * one. A serial is resolved against the history: terraform serials repeat
 * (`state push -force`, an older run writing late), so when several versions
 * carry it the newest is taken and stderr says which others did.
 */
export async function selectedVersion(
  command: Command,
  client: KilolockClient,
  state: string,
  flags: VersionFlags,
  names: { serial: string; version: string } = { serial: '--serial', version: '--version' },
): Promise<number | undefined> {
  const serial = integerOption(command, flags.serial, names.serial);
  const version = integerOption(command, flags.version, names.version);
  if (serial !== undefined && version !== undefined) {
    usage(command, `give ${names.serial} or ${names.version}, not both`);
  }
  if (serial === undefined) return version;
  const history = await client.history(state);
  if (history.deletedAt !== null) {
    throw new KlError('STATE.NOT_FOUND', `state "${state}" was deleted at ${history.deletedAt}`);
  }
  const carrying = history.versions.filter((v) => v.serial === serial).map((v) => v.version);
  if (carrying.length === 0) {
    throw new KlError('VERSION.NOT_FOUND', `state "${state}" has no version with serial ${serial}`);
  }
  const chosen = carrying[carrying.length - 1];
  if (carrying.length > 1) {
    process.stderr.write(
      `kl: serial ${serial} is carried by versions ${carrying.join(', ')}; using version ${chosen} (pick one with ${names.version})\n`,
    );
  }
  return chosen;
}
