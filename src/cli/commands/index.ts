import { Command } from 'commander';
import { registerArchiveCommand } from './archive.command';
import { registerDiffCommand } from './diff.command';
import { registerEventsCommand } from './events.command';
import { registerExportCommand } from './export.command';
import { registerForceUnlockCommand } from './force-unlock.command';
import { registerHistoryCommand } from './history.command';
import { registerImportCommand } from './import.command';
import { registerLocksCommand } from './locks.command';
import { registerProjectionsCommand } from './projections.command';
import { registerQueryCommand } from './query.command';
import { registerReservationsCommand } from './reservations.command';
import { registerResourceCommand } from './resource.command';
import { registerResourcesCommand } from './resources.command';
import { registerRunsCommand } from './runs.command';
import { registerShowCommand } from './show.command';
import { registerStatesCommand } from './states.command';

/** Every REST-backed `kl` command. */
export function registerStateCommands(program: Command): void {
  registerQueryCommand(program);
  registerStatesCommand(program);
  registerHistoryCommand(program);
  registerShowCommand(program);
  registerResourcesCommand(program);
  registerResourceCommand(program);
  registerDiffCommand(program);
  registerImportCommand(program);
  registerExportCommand(program);
  registerLocksCommand(program);
  registerForceUnlockCommand(program);
  registerReservationsCommand(program);
  registerRunsCommand(program);
  registerProjectionsCommand(program);
  registerEventsCommand(program);
  registerArchiveCommand(program);
}
