import { Command, CommanderError } from 'commander';
import { DomainError } from '../../domain/shared/domain-error';

/** `kl plan` and `kl apply` exit codes (ADR 0007). */
export const APPLY_EXIT = {
  ok: 0,
  failed: 1,
  conflict: 2,
  usage: 3,
  signal: (s: NodeJS.Signals): number => (s === 'SIGTERM' ? 143 : 130),
} as const;

/** A mistake in how kl was called or configured (exit 3). */
export class UsageError extends Error {}

/** Errors that mean "fix how you call kl or where it points", not "terraform failed". */
const CONFIGURATION_CODES = new Set([
  'PLAN.SCOPE_INVALID',
  'PLAN.CONFIG_INVALID',
  'PLAN.BACKEND_UNKNOWN',
  'PLAN.FILE_INVALID',
  'STATE.NOT_FOUND',
  'SERVER.UNREACHABLE',
  'CONFIG.INVALID',
]);

export function exitCodeOf(e: unknown): number {
  if (e instanceof UsageError) return APPLY_EXIT.usage;
  if (e instanceof DomainError && CONFIGURATION_CODES.has(e.code)) return APPLY_EXIT.usage;
  return APPLY_EXIT.failed;
}

/** Commander's own usage errors (unknown option, missing argument) exit 3 here, not 2. */
export function usageExit3(command: Command): Command {
  return command.exitOverride((err) => {
    if (err.exitCode === 0) throw err;
    throw new CommanderError(APPLY_EXIT.usage, err.code, err.message);
  });
}

/**
 * SIGINT/SIGTERM become an abort: terraform is interrupted gracefully and
 * the run ends as aborted. A second signal leaves at once.
 */
export function onceSignalled(): {
  signal: AbortSignal;
  readonly received: NodeJS.Signals | null;
  dispose(): void;
} {
  const controller = new AbortController();
  let received: NodeJS.Signals | null = null;
  const on = (s: NodeJS.Signals) => {
    if (received) process.exit(APPLY_EXIT.signal(s));
    received = s;
    process.stderr.write(`\nkl: ${s}: interrupting terraform and ending the run…\n`);
    controller.abort();
  };
  process.on('SIGINT', on);
  process.on('SIGTERM', on);
  return {
    signal: controller.signal,
    get received() {
      return received;
    },
    dispose() {
      process.off('SIGINT', on);
      process.off('SIGTERM', on);
    },
  };
}
