import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { KL, KLD } from '../support/kld-process';
import { codeIn, userDocs } from '../support/doc-text';

type Bin = 'kl' | 'kld';
const BINARIES: Record<Bin, string> = { kl: KL, kld: KLD };

/** A `kl` or `kld` invocation shown in the docs: its words up to the end of the command line. */
interface Shown {
  file: string;
  bin: Bin;
  words: string[];
}

/** `kl …` or `kld …` (or `npx kl …`) in code, cut where the shell command ends (`|`, `&&`, `;`, a comment). */
function shownInvocations(): Shown[] {
  const shown: Shown[] = [];
  for (const { file, text } of userDocs()) {
    for (const code of codeIn(text)) {
      const command = code.replace(/(?:^|\s)(?:#|--) .*$/, ''); // a shell or SQL comment
      for (const m of command.matchAll(/(?:^|[\s(])(?:npx )?(kld?) ([a-z-][^\n]*)/g)) {
        const line = m[2].split(/ \\?\| | && |; /)[0];
        shown.push({ file, bin: m[1] as Bin, words: line.split(/\s+/).filter((w) => w !== '') });
      }
    }
  }
  return shown;
}

interface Help {
  flags: string[];
  commands: string[];
}

/** What `<bin> <path> --help` lists: its flags and its subcommands. */
async function helpOf(bin: Bin, path: string[]): Promise<Help | null> {
  let stdout: string;
  try {
    ({ stdout } = await promisify(execFile)(process.execPath, [BINARIES[bin], ...path, '--help']));
  } catch {
    return null;
  }
  const section = (title: string) => {
    const start = stdout.indexOf(`\n${title}:\n`);
    if (start < 0) return [];
    return stdout
      .slice(start + title.length + 3)
      .split(/\n(?=\S)/)[0]
      .split('\n')
      .filter((line) => /^ {2}\S/.test(line));
  };
  return {
    flags: section('Options').flatMap((line) =>
      [
        ...line
          .trim()
          .replace(/ {2,}.*$/, '')
          .matchAll(/(?:^|[\s,])(--?[a-zA-Z][\w-]*)/g),
      ].map((m) => m[1]),
    ),
    commands: section('Commands').map((line) => line.trim().split(/[\s|]/)[0]),
  };
}

// Asked once each, all at once: kld's help alone takes seconds on a busy machine.
const helps = new Map<string, Promise<Help | null>>();
function cachedHelp(bin: Bin, path: string[]): Promise<Help | null> {
  const key = [bin, ...path].join(' ');
  if (!helps.has(key)) helps.set(key, helpOf(bin, path));
  return helps.get(key)!;
}

/**
 * The command the words name (a subcommand when the next word is one) and its
 * flags; options of the program may come first (`kld --config kld.yaml serve`).
 */
async function resolve(
  bin: Bin,
  words: string[],
): Promise<{ path: string; flags: Set<string> } | null> {
  const top = await cachedHelp(bin, []);
  if (!top) return null;
  let at = 0;
  while (at < words.length && words[at].startsWith('-')) at += 2; // a flag and its value
  if (at >= words.length) return { path: bin, flags: new Set(top.flags) }; // `kld --config`
  const name = /^[a-z][a-z-]*/.exec(words[at])?.[0] ?? '';
  const command = top.commands.includes(name) ? await cachedHelp(bin, [name]) : null;
  if (!command) return null;
  const path = command.commands.includes(words[at + 1]) ? [name, words[at + 1]] : [name];
  const sub = path.length > 1 ? await cachedHelp(bin, path) : command;
  if (!sub) return null;
  return {
    path: [bin, ...path].join(' '),
    flags: new Set([...top.flags, ...command.flags, ...sub.flags]),
  };
}

/** The flags the words use: `--name`, `-f`, also inside `[…]` of a usage line. */
function flagsOf(words: string[]): string[] {
  return words.flatMap((w) => {
    const m = /^\[*(--?[a-zA-Z][\w-]*)/.exec(w);
    return m ? [m[1].replace(/=.*$/, '')] : [];
  });
}

/**
 * Every `kl` and `kld` command line in the README and docs names a command
 * the program has, and only flags that command (or the program itself)
 * takes, as `kl <command> --help` lists them (the built programs: `npm test`
 * builds before it runs the specs).
 */
describe('kl and kld as the docs show them', () => {
  let shown: Shown[];
  beforeAll(() => {
    shown = shownInvocations();
  });

  it('finds the command lines of the README and docs', () => {
    expect(shown.length).toBeGreaterThan(100);
    expect(shown.map((s) => [s.bin, ...s.words.slice(0, 2)].join(' '))).toEqual(
      expect.arrayContaining(['kl states', 'kl apply abort', 'kl state mv', 'kld token create']),
    );
  });

  it('uses only commands and flags kl and kld have', async () => {
    const wrong: string[] = [];
    const commands = await Promise.all(shown.map(({ bin, words }) => resolve(bin, words)));
    for (const [i, { file, bin, words }] of shown.entries()) {
      const command = commands[i];
      if (command === null) {
        wrong.push(`${file}: ${bin} ${words.join(' ')}: no such command`);
        continue;
      }
      for (const flag of flagsOf(words)) {
        if (!command.flags.has(flag)) wrong.push(`${file}: ${command.path} has no ${flag}`);
      }
    }
    expect([...new Set(wrong)]).toEqual([]);
  }, 300_000); // some 60 helps, kld's each a few seconds under load
});
