import { spawnSync } from 'node:child_process';
import { KL } from '../support/kld-process';
import { codeIn, userDocs } from '../support/doc-text';

/** A `kl` invocation shown in the docs: its words up to the end of the command line. */
interface Shown {
  file: string;
  words: string[];
}

/** `kl …` (or `npx kl …`) in code, cut where the shell command ends (`|`, `&&`, `;`, `# `). */
function shownInvocations(): Shown[] {
  const shown: Shown[] = [];
  for (const { file, text } of userDocs()) {
    for (const code of codeIn(text)) {
      const command = code.replace(/(?:^|\s)# .*$/, '');
      for (const m of command.matchAll(/(?:^|[\s(])(?:npx )?kl ([a-z][^\n]*)/g)) {
        const line = m[1].split(/ \\?\| | && |; /)[0];
        shown.push({ file, words: line.split(/\s+/).filter((w) => w !== '') });
      }
    }
  }
  return shown;
}

/** What `kl <path> --help` lists: its flags and its subcommands. */
function helpOf(path: string[]): { flags: string[]; commands: string[] } | null {
  const run = spawnSync(process.execPath, [KL, ...path, '--help'], { encoding: 'utf8' });
  if (run.status !== 0) return null;
  const section = (title: string) => {
    const start = run.stdout.indexOf(`\n${title}:\n`);
    if (start < 0) return [];
    return run.stdout
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

const helps = new Map<string, ReturnType<typeof helpOf>>();
function cachedHelp(path: string[]): ReturnType<typeof helpOf> {
  const key = path.join(' ');
  if (!helps.has(key)) helps.set(key, helpOf(path));
  return helps.get(key)!;
}

/** The command the words name (a subcommand when the second word is one) and its flags. */
function resolve(words: string[]): { path: string; flags: Set<string> } | null {
  const name = /^[a-z][a-z-]*/.exec(words[0])?.[0] ?? '';
  const kl = cachedHelp([]);
  const command = kl?.commands.includes(name) ? cachedHelp([name]) : null;
  if (!kl || !command) return null;
  const path = command.commands.includes(words[1]) ? [name, words[1]] : [name];
  const sub = path.length > 1 ? cachedHelp(path) : command;
  if (!sub) return null;
  return { path: path.join(' '), flags: new Set([...kl.flags, ...command.flags, ...sub.flags]) };
}

/** The flags the words use: `--name`, `-f`, also inside `[…]` of a usage line. */
function flagsOf(words: string[]): string[] {
  return words.flatMap((w) => {
    const m = /^\[*(--?[a-zA-Z][\w-]*)/.exec(w);
    return m ? [m[1].replace(/=.*$/, '')] : [];
  });
}

/**
 * Every `kl` command line in the README and docs names a command kl has, and
 * only flags that command (or kl itself) takes, as `kl <command> --help`
 * lists them (the built kl: `npm test` builds before it runs the specs).
 */
describe('kl as the docs show it', () => {
  let shown: Shown[];
  beforeAll(() => {
    shown = shownInvocations();
  });

  it('finds the command lines of the README and docs', () => {
    expect(shown.length).toBeGreaterThan(100);
    expect(shown.map((s) => s.words.slice(0, 2).join(' '))).toEqual(
      expect.arrayContaining(['states', 'apply abort', 'quota check', 'state mv']),
    );
  });

  it('uses only commands and flags kl has', () => {
    const wrong: string[] = [];
    for (const { file, words } of shown) {
      const command = resolve(words);
      if (command === null) {
        wrong.push(`${file}: kl ${words.join(' ')}: no such command`);
        continue;
      }
      for (const flag of flagsOf(words)) {
        if (!command.flags.has(flag)) wrong.push(`${file}: kl ${command.path} has no ${flag}`);
      }
    }
    expect([...new Set(wrong)]).toEqual([]);
  });
});
