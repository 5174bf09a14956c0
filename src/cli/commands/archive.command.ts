import { Command } from 'commander';
import * as fs from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { DomainError } from '../../domain/shared/domain-error';
import { KlError } from '../cli-error';
import { terminalSafeJsonStream } from '../terminal-text';
import { contextOf, usage } from './context';

/**
 * `kl archive export STATE [-o FILE]` writes the state's whole history
 * (every event of its stream, NDJSON with a header and checksum);
 * `kl archive import FILE [--name NEW]` recreates it, every version, lock,
 * actor and time, under its name or NEW. `kl import` instead takes one
 * document and makes it one new version.
 */
export function registerArchiveCommand(program: Command): void {
  const archive = program
    .command('archive')
    .description("a state's whole history: export it to a file, import it elsewhere");

  archive
    .command('export')
    .description('write every event of a state (NDJSON) to a file or stdout')
    .argument('<state>', 'state name')
    .option('-o, --output <file>', 'write here instead of stdout')
    .action(async (state: string, options: { output?: string }, command: Command) => {
      const { client } = contextOf(command);
      const body = await client.exportArchive(state);
      // Written beside the target and renamed: a failed export leaves no half file.
      const partial = options.output ? `${options.output}.partial` : null;
      const out = partial ? fs.createWriteStream(partial) : process.stdout;
      try {
        // stdout is not ended: on a terminal, kl's last write after an ended one would crash.
        if (partial) await pipeline(body, out);
        else if (process.stdout.isTTY) {
          await pipeline(body, terminalSafeJsonStream(), out, { end: false });
        } else await pipeline(body, out, { end: false });
      } catch (err) {
        if (partial) fs.rmSync(partial, { force: true });
        // kl's own bounds name the request and the bound.
        if (err instanceof DomainError) throw err;
        throw new KlError(
          'SERVER.UNREACHABLE',
          `export of ${state} broke off: ${(err as Error).message}`,
        );
      }
      if (partial) fs.renameSync(partial, options.output!);
    });

  archive
    .command('import')
    .description('recreate an exported history (refused if the name already has one)')
    .argument('<file>', 'an archive written by kl archive export')
    .option('--name <state>', "import under this name instead of the archive's")
    .action(async (file: string, options: { name?: string }, command: Command) => {
      if (!fs.existsSync(file)) usage(command, `no such file: ${file}`);
      const { client, print } = contextOf(command);
      const r = await client.importArchive(fs.readFileSync(file), options.name);
      print({ columns: ['state', 'versions', 'events'], rows: [[r.state, r.versions, r.events]] });
    });
}
