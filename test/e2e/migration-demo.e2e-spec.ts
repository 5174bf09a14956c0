import { ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { processesMatching, ROOT } from '../support/kld-process';

/**
 * examples/big-state/migration-demo.sh as a user runs it: local backend →
 * kld (terraform init -migrate-state) → applies → local again → a fresh kld,
 * where `kl import` of the final snapshot gives 1 version and the archive
 * round trip every version. Each run gets its own TMPDIR, so whatever the
 * script leaves behind (files, a kld, its postgres) is found there.
 */

jest.setTimeout(180_000);

const SCRIPT = path.join(ROOT, 'examples/big-state/migration-demo.sh');
const CHANGES = 3;

interface Run {
  code: number | null;
  output: string;
}

let tmp: string;
const running = new Set<ChildProcess>();

function runDemo(onOutput?: (output: string, child: ChildProcess) => void): Promise<Run> {
  const env: NodeJS.ProcessEnv = { ...process.env, TMPDIR: tmp, CHANGES: String(CHANGES) };
  delete env.KL_SERVER_URL;
  // Its own process group, like a script started from a terminal.
  const child = spawn('bash', [SCRIPT], { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  running.add(child);
  let output = '';
  const take = (c: Buffer) => {
    output += c.toString();
    onOutput?.(output, child);
  };
  child.stdout!.on('data', take);
  child.stderr!.on('data', take);
  const timer = setTimeout(() => process.kill(-child.pid!, 'SIGKILL'), 170_000);
  return new Promise((resolve) =>
    child.on('close', (code) => {
      clearTimeout(timer);
      running.delete(child);
      resolve({ code, output });
    }),
  );
}

/** The data rows of the table printed after the `== kl history NAME ` heading. */
function historyRows(output: string, name: string): string[][] {
  const at = output.indexOf(`== kl history ${name} `);
  expect(at).toBeGreaterThanOrEqual(0);
  const lines = output.slice(at).split('\n').slice(1);
  const table = lines.slice(
    0,
    lines.findIndex((l) => l.startsWith('└')),
  );
  return table
    .filter((l) => /^│ \d/.test(l))
    .map((l) =>
      l
        .split('│')
        .slice(1, -1)
        .map((cell) => cell.trim()),
    );
}

/** What the script left behind in its TMPDIR: files and live processes. */
function leftovers(): { files: string[]; processes: number[] } {
  return { files: fs.readdirSync(tmp), processes: processesMatching(tmp) };
}

beforeEach(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-demo-test-'));
  fs.chmodSync(tmp, 0o711); // as root, the embedded server's postgres user must enter it
});

afterEach(() => {
  for (const child of running) process.kill(-child.pid!, 'SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });
});

describe('examples/big-state/migration-demo.sh', () => {
  it('prints the snapshot re-import as 1 version and the archive round trip as every version, and cleans up', async () => {
    const run = await runDemo();
    expect({ code: run.code, output: run.output }).toEqual({ code: 0, output: run.output });

    const original = historyRows(run.output, 'migration-demo');
    const snapshot = historyRows(run.output, 'migration-demo/snapshot');
    const restored = historyRows(run.output, 'migration-demo/restored');

    // The migration's version and one per change, by alice and bob in turn.
    expect(original.map((r) => [r[0], r[1], r[5]])).toEqual([
      ['1', '1', 'alice'],
      ['2', '2', 'alice'],
      ['3', '3', 'bob'],
      ['4', '4', 'alice'],
    ]);
    expect(original).toHaveLength(CHANGES + 1);
    // Every column, times and actors included, comes back.
    expect(restored).toEqual(original);
    // kl import: one version, the final serial, imported now by whoever ran kl.
    expect(snapshot).toHaveLength(1);
    expect(snapshot[0].slice(0, 5)).toEqual(['1', '4', original[3][2], '', 'import']);
    expect(snapshot[0][9] > original[3][9]).toBe(true);
    expect(run.output).toContain("the restored history equals the original's: 4 versions");

    expect(leftovers()).toEqual({ files: [], processes: [] });
  });

  it('stops its kld and PostgreSQL and removes its files when interrupted (Ctrl-C)', async () => {
    let sent = false;
    const run = await runDemo((output, child) => {
      if (!sent && output.includes('kld-1 ready at')) {
        sent = true;
        process.kill(-child.pid!, 'SIGINT'); // what a terminal sends to the foreground group
      }
    });
    expect(sent).toBe(true);
    expect(run.code).not.toBe(0);
    expect(run.output).not.toContain('== 5.');
    expect(leftovers()).toEqual({ files: [], processes: [] });
  });
});
