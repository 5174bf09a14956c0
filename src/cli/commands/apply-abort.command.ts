import { Command } from 'commander';
import { contextOf } from './context';

/**
 * `kl apply abort <run-id>`: the operator's escape hatch for a dead run
 * (its client was killed): its reservations are released and it ends
 * `aborted`. kld finds the run's state unless --state names it.
 *
 * Added under `kl apply` (whose own action applies a plan file); the apply
 * command is created here when nothing registered it first.
 */
export function registerApplyAbortCommand(program: Command): void {
  const apply =
    program.commands.find((c) => c.name() === 'apply') ??
    program.command('apply').description('kl apply runs');
  apply
    .command('abort')
    .description(
      "end a dead kl apply run and release its reservations (an operator's escape hatch)",
    )
    .argument('<run-id>', 'the run (kl runs, kl reservations)')
    .option('--state <name>', 'the state the run is on (looked up when absent)')
    .action(async (runId: string, options: { state?: string }, command: Command) => {
      const { client, print } = contextOf(command);
      const aborted = await client.abortRun(runId, options.state);
      print({
        columns: ['run_id', 'state', 'status', 'released'],
        rows: [[aborted.run_id, aborted.state, aborted.status, aborted.released]],
      });
    });
}
