import { Command } from 'commander';
import * as readline from 'node:readline/promises';
import { defaultActor } from '../../infrastructure/rest/kld-http-client';
import { KlError } from '../cli-error';
import { visible } from '../terminal-text';
import { contextOf } from './context';

/**
 * `kl force-unlock <state>`: releases the lock, like `terraform
 * force-unlock`. Another person's lock is released only after a yes on the
 * terminal, or with --yes; and only the lock that was shown is released, so
 * a lock taken meanwhile by someone else is left alone. Several plans may
 * hold a state at once: then --lock-id picks the one to release.
 */
export function registerForceUnlockCommand(program: Command): void {
  program
    .command('force-unlock')
    .description("release the lock on a state (asks first if it is someone else's)")
    .argument('<state>', 'state name')
    .option('-y, --yes', "release someone else's lock without asking")
    .option('--lock-id <id>', 'the lock to release, when several plans hold the state')
    .action(
      async (state: string, options: { yes?: boolean; lockId?: string }, command: Command) => {
        const { client, print } = contextOf(command);
        const locks = (await client.locks()).filter((l) => l.name === state);
        if (options.lockId !== undefined && !locks.some((l) => l.lockId === options.lockId)) {
          throw new KlError(
            'STATE.LOCK_MISMATCH',
            `state "${state}" holds no lock ${options.lockId}` +
              (locks.length ? ` (held: ${locks.map((l) => l.lockId).join(', ')})` : ''),
          );
        }
        if (options.lockId === undefined && locks.length > 1) {
          throw new KlError(
            'CLI.ABORTED',
            `state "${state}" is held by ${locks.length} locks (${locks.map((l) => `${l.lockId} of ${l.who ?? l.acquiredBy}`).join(', ')}): pick one with --lock-id`,
          );
        }
        const held = locks.find((l) => options.lockId === undefined || l.lockId === options.lockId);
        if (!held) {
          // Nothing to release; a missing or deleted state is still an error.
          const { deletedAt } = await client.history(state);
          if (deletedAt !== null)
            throw new KlError('STATE.NOT_FOUND', `state "${state}" was deleted at ${deletedAt}`);
          print({ columns, rows: [[state, null, null]] });
          return;
        }
        const who = held.who ?? held.acquiredBy;
        const mine = who === defaultActor();
        if (!mine && !options.yes) {
          const what = `lock ${held.lockId} on ${state}, held by ${who} since ${held.acquiredAt}${held.operation ? ` (${held.operation})` : ''}`;
          if (!process.stdin.isTTY) {
            throw new KlError('CLI.ABORTED', `${what}: not yours; pass --yes to release it`);
          }
          if (!(await confirm(`Release the ${visible(what)}? [y/N] `))) {
            throw new KlError('CLI.ABORTED', 'not released');
          }
        }
        const { released } = await client.forceUnlock(state, held.lockId);
        print({ columns, rows: [[state, released, released === null ? null : who]] });
      },
    );
}

const columns = ['state', 'released_lock_id', 'held_by'];

async function confirm(question: string): Promise<boolean> {
  const rl = readline.createInterface({ input: process.stdin, output: process.stderr });
  try {
    return /^y(es)?$/i.test((await rl.question(question)).trim());
  } finally {
    rl.close();
  }
}
