import { Command } from 'commander';
import { contextOf } from './context';

/**
 * `kl runs [state]`: kl apply runs, newest first, with what they reserved
 * (the first globs of each mode and how many) and committed; `kl` reads a
 * run's whole sets from its own route.
 */
export function registerRunsCommand(program: Command): void {
  program
    .command('runs')
    .description('list kl apply runs, newest first')
    .argument('[state]', 'only this state')
    .action(async (state: string | undefined, _options: unknown, command: Command) => {
      const { client, print } = contextOf(command);
      const runs = await client.runs(state);
      print({
        columns: [
          'run_id',
          'state',
          'actor',
          'status',
          'lane',
          'write',
          'writes',
          'read',
          'reads',
          'started_at',
          'finished_at',
          'changes',
          'version',
          'serial',
          'error',
          'output_state',
        ],
        rows: runs.map((r) => [
          r.run_id,
          r.state,
          r.actor,
          r.status,
          r.lane,
          r.write.first,
          r.write.count,
          r.read.first,
          r.read.count,
          r.started_at,
          r.finished_at,
          r.counters === null
            ? null
            : `+${r.counters.add} ~${r.counters.change} -${r.counters.destroy}`,
          r.committed_version,
          r.committed_serial,
          r.error_summary === null ? null : String(r.error_summary).split('\n')[0],
          r.output_state,
        ]),
      });
    });
}
