import * as path from 'node:path';
import { EarlyRead, readEarly } from '../infrastructure/terraform/early-hcl-read';

/** kl's options that take a value, the program's and `kl plan`'s: what follows one is no argument. */
const TAKES_VALUE = new Set([
  '--server',
  '--token',
  '--client-cert',
  '--client-key',
  '--state-url',
  '--protocol',
  '--format',
  '-f',
  '--file',
  '--target',
  '-o',
  '--out',
  '--state',
]);

/**
 * The configuration directory of a `kl plan -f` command line, else null: a
 * cheap look at argv before commander is even loaded. A wrong guess costs
 * only the early read (the reader takes from it only files of the same
 * text), so it need not know every form commander accepts.
 */
export function scopedPlanDir(args: readonly string[]): string | null {
  const positional: string[] = [];
  let scoped = false;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === '--') {
      positional.push(...args.slice(i + 1));
      break;
    }
    if (arg === '-h' || arg === '--help') return null;
    if (!arg.startsWith('-')) {
      positional.push(arg);
      continue;
    }
    if (arg === '-f' || arg.startsWith('--file') || /^-f./.test(arg)) scoped = true;
    if (TAKES_VALUE.has(arg)) i++;
  }
  return positional[0] === 'plan' && scoped ? (positional[1] ?? '.') : null;
}

/**
 * `kl plan -f`'s configuration, being read on the second core since kl's
 * start. kl.ts imports this module first, before commander and kl's own
 * modules (about 35 ms of the main thread): a worker takes 10–15 ms to
 * start, so started any later it would answer after the main thread could
 * have read the files itself. Any other command line starts nothing.
 */
export const earlyConfigRead: EarlyRead | null = (() => {
  const dir = scopedPlanDir(process.argv.slice(2));
  return dir === null ? null : readEarly(path.resolve(dir));
})();
