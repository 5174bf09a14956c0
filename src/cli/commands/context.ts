import { Command } from 'commander';
import * as fs from 'node:fs';
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
