import { Command } from 'commander';

/** Registers one top-level command (with its options and subcommands) on the program. */
export type RegisterCommand = (program: Command) => void;

/**
 * One top-level `kl` command: its name and one-line summary for `kl --help`,
 * and a loader for the module that defines it. Only the module of the command
 * being run is loaded, so `kl states` does not pay for the provider plugin
 * client `kl refresh` needs (start-up is in bench/cli-startup.ts).
 */
export interface CommandEntry {
  name: string;
  summary: string;
  load(): Promise<RegisterCommand>;
}

/** Every `kl` command. A new command is one more entry. */
export const COMMANDS: readonly CommandEntry[] = [
  {
    name: 'query',
    summary: 'run read-only SQL against the read models (see docs/sql.md)',
    load: async () => (await import('./query.command')).registerQueryCommand,
  },
  {
    name: 'states',
    summary: 'list states with their current version, size and lock',
    load: async () => (await import('./states.command')).registerStatesCommand,
  },
  {
    name: 'history',
    summary: 'list every version of a state, oldest first (also of a deleted state)',
    load: async () => (await import('./history.command')).registerHistoryCommand,
  },
  {
    name: 'show',
    summary: 'show a state: version, serial, lineage, outputs and instances',
    load: async () => (await import('./show.command')).registerShowCommand,
  },
  {
    name: 'resources',
    summary: 'list the instances of a state (now, or at one version)',
    load: async () => (await import('./resources.command')).registerResourcesCommand,
  },
  {
    name: 'resource',
    summary: 'show one instance (now, or at one version), or with --history every version of it',
    load: async () => (await import('./resource.command')).registerResourceCommand,
  },
  {
    name: 'diff',
    summary: 'instances added, removed and changed between two versions',
    load: async () => (await import('./diff.command')).registerDiffCommand,
  },
  {
    name: 'import',
    summary: 'import a .tfstate file as a new version of a state',
    load: async () => (await import('./import.command')).registerImportCommand,
  },
  {
    name: 'export',
    summary: 'write a state document (current, or one version) to stdout or a file',
    load: async () => (await import('./export.command')).registerExportCommand,
  },
  {
    name: 'locks',
    summary: 'list the locks held now',
    load: async () => (await import('./locks.command')).registerLocksCommand,
  },
  {
    name: 'force-unlock',
    summary: "release the lock on a state (asks first if it is someone else's)",
    load: async () => (await import('./force-unlock.command')).registerForceUnlockCommand,
  },
  {
    name: 'reservations',
    summary: 'list the reservations held now: kl apply runs and terraform locks',
    load: async () => (await import('./reservations.command')).registerReservationsCommand,
  },
  {
    name: 'runs',
    summary: 'list kl apply runs, newest first',
    load: async () => (await import('./runs.command')).registerRunsCommand,
  },
  {
    name: 'plan',
    summary: 'plan a change in a private directory and save the reservations kl apply will take',
    load: async () => (await import('./plan.command')).registerPlanCommand,
  },
  {
    name: 'apply',
    summary:
      'apply a kl plan on its own part of the state, in parallel with applies on other parts',
    load: async () => {
      const [apply, abort] = await Promise.all([
        import('./apply.command'),
        import('./apply-abort.command'),
      ]);
      return (program) => {
        apply.registerApplyCommand(program);
        // After `kl apply` itself: abort is one of its subcommands.
        abort.registerApplyAbortCommand(program);
      };
    },
  },
  {
    name: 'events',
    summary: 'print the event log (oldest first); --follow to keep printing new events',
    load: async () => (await import('./events.command')).registerEventsCommand,
  },
  {
    name: 'archive',
    summary: "a state's whole history: export it to a file, import it elsewhere",
    load: async () => (await import('./archive.command')).registerArchiveCommand,
  },
  {
    name: 'projections',
    summary: 'manage read-model projections',
    load: async () => (await import('./projections.command')).registerProjectionsCommand,
  },
  {
    name: 'provider',
    summary: 'configure and inspect Terraform provider plugins',
    load: async () => {
      const [schema, config] = await Promise.all([
        import('./provider-schema.command'),
        import('./provider-config.command'),
      ]);
      return (program) => {
        schema.registerProviderSchemaCommand(program);
        config.registerProviderConfigCommands(program);
      };
    },
  },
  {
    name: 'refresh',
    summary: 'read every managed resource of a state through its providers and record drift',
    load: async () => (await import('./refresh.command')).registerRefreshCommand,
  },
  {
    name: 'drift',
    summary: 'list the current drift of a state (found by kl refresh, cleared by the next apply)',
    load: async () => (await import('./drift.command')).registerDriftCommand,
  },
  {
    name: 'state',
    summary: 'native state operations on the state-engine lane (docs/state-engine.md)',
    load: async () => (await import('./state-engine.command')).registerStateCommand,
  },
  {
    name: 'rollback',
    summary: 'restore part of a state as it was, as a new version',
    load: async () => (await import('./state-engine.command')).registerRollbackCommand,
  },
  {
    name: 'config',
    summary: 'print where kl finds the state and how it talks to it, and where each came from',
    load: async () => (await import('./state-engine.command')).registerConfigCommand,
  },
  {
    name: 'token',
    summary: 'manage API tokens (needs admin)',
    load: async () => (await import('./token.command')).registerTokenCommand,
  },
  {
    name: 'backend-config',
    summary:
      'print the terraform backend block for a state, or write it to DIR/kilolock_backend.tf',
    load: async () => (await import('./backend-config.command')).registerBackendConfigCommand,
  },
  {
    name: 'quota',
    summary: 'show quota usage and headroom; set, remove and check quotas',
    load: async () => (await import('./quota.command')).registerQuotaCommand,
  },
  {
    name: 'version',
    summary: 'print the kl version and the server (kld) version',
    load: async () => (await import('./version.command')).registerVersionCommand,
  },
];

/**
 * The command `argv` (without node and script) runs, as commander will see
 * it: the first word that is not a global option or its value, or the word
 * after `help`. Undefined for `kl`, `kl --help` and unknown commands.
 * `valued` are the global options that take a value (the word after them is
 * not the command).
 */
export function commandNamed(
  args: readonly string[],
  valued: ReadonlySet<string>,
): CommandEntry | undefined {
  let word: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === '--') break;
    if (arg.startsWith('-')) {
      if (valued.has(arg)) i++;
      continue;
    }
    if (word === undefined && arg === 'help') {
      word = arg;
      continue;
    }
    word = arg;
    break;
  }
  return COMMANDS.find((c) => c.name === word);
}

/**
 * Defines `argv`'s command in full and every other one by name and summary
 * only: enough for `kl --help` and commander's "unknown command" hints.
 */
export async function registerCommands(program: Command, args: readonly string[]): Promise<void> {
  const valued = new Set(
    program.options
      .filter((o) => o.required || o.optional)
      .flatMap((o) => [o.long, o.short])
      .filter((flag): flag is string => flag !== undefined),
  );
  const running = commandNamed(args, valued);
  for (const entry of COMMANDS) {
    if (entry === running) (await entry.load())(program);
    else program.command(entry.name).description(entry.summary);
  }
}
