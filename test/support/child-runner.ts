import { ChildProcess, spawn } from 'node:child_process';

export interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  ms: number;
}

export interface RunOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  onStart?: (child: ChildProcess) => void;
}

/**
 * Runs commands as children of a test suite, collecting their output, with
 * a hard timeout each; `killAll` (in afterAll) ends whatever is still running.
 */
export class ChildRunner {
  private readonly running = new Set<ChildProcess>();

  constructor(
    private readonly defaults: () => { cwd: string; env: NodeJS.ProcessEnv },
    private readonly timeoutMs = 90_000,
  ) {}

  run(command: string, args: string[], options: RunOptions = {}): Promise<Run> {
    const { cwd, env } = this.defaults();
    return new Promise((resolve) => {
      const started = Date.now();
      const child = spawn(command, args, {
        cwd: options.cwd ?? cwd,
        env: { ...env, ...options.env },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      this.running.add(child);
      let stdout = '';
      let stderr = '';
      child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
      child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
      const timer = setTimeout(() => child.kill('SIGKILL'), this.timeoutMs);
      child.on('close', (code, signal) => {
        clearTimeout(timer);
        this.running.delete(child);
        resolve({ code, signal, stdout, stderr, ms: Date.now() - started });
      });
      options.onStart?.(child);
    });
  }

  killAll(): void {
    for (const child of this.running) child.kill('SIGKILL');
  }
}

/** The run, or an error carrying its output when it did not exit 0. */
export async function ok(pending: Promise<Run>, what: string): Promise<Run> {
  const r = await pending;
  if (r.code !== 0) throw new Error(`${what} exited ${r.code}\n${r.stdout}\n${r.stderr}`);
  return r;
}
