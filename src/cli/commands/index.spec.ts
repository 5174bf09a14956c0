import { Command } from 'commander';
import { commandNamed, COMMANDS, registerCommands } from './index';

describe('the kl command table', () => {
  const valued = new Set(['--server', '--token', '--format', '--state-url']);

  it('finds the command past global options and their values, and after help', () => {
    expect(commandNamed(['states'], valued)?.name).toBe('states');
    expect(
      commandNamed(['--server', 'http://x', '--format', 'json', 'history', 'a'], valued)?.name,
    ).toBe('history');
    expect(commandNamed(['--token', 'states', 'locks'], valued)?.name).toBe('locks');
    expect(commandNamed(['--format=csv', 'query', 'select 1'], valued)?.name).toBe('query');
    expect(commandNamed(['--state-url', 'config', 'state', 'rm', 'a'], valued)?.name).toBe('state');
    expect(commandNamed(['help', 'refresh'], valued)?.name).toBe('refresh');
    expect(commandNamed(['--help'], valued)).toBeUndefined();
    expect(commandNamed([], valued)).toBeUndefined();
    expect(commandNamed(['nope', 'states'], valued)).toBeUndefined();
  });

  it('loads, for each entry, the module that defines the command of that name', async () => {
    for (const entry of COMMANDS) {
      const program = new Command('kl');
      (await entry.load())(program);
      const defined = program.commands.map((c) => c.name());
      expect(defined).toEqual([entry.name]);
    }
  });

  it('defines the running command in full and the others by name only', async () => {
    const program = new Command('kl').option('--protocol <protocol>', 'a valued global option');
    await registerCommands(program, ['--protocol', 'config', 'history', 'x']);
    const history = program.commands.find((c) => c.name() === 'history')!;
    expect(history.registeredArguments.map((a) => a.name())).toEqual(['state']);
    const states = program.commands.find((c) => c.name() === 'states')!;
    expect(states.description()).toBe(COMMANDS.find((c) => c.name === 'states')!.summary);
    expect(program.commands.map((c) => c.name())).toEqual(COMMANDS.map((c) => c.name));
  });
});
