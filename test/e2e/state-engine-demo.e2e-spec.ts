import { ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { processesMatching, ROOT } from '../support/kld-process';

/**
 * examples/big-state/state-engine-demo.sh as a user runs it: scope
 * expansion with an undeployed support node, a trusted kl apply on the
 * state-engine lane, an unprovable scope falling back, state mv and rm with
 * previews, rollback restoring the removed address; terraform agreeing
 * after each write (the script checks state pull and plan itself and stops
 * when they disagree). Each run gets its own TMPDIR, so whatever the script
 * leaves behind (files, a kld, its postgres) is found there.
 */

jest.setTimeout(240_000);

const SCRIPT = path.join(ROOT, 'examples/big-state/state-engine-demo.sh');

interface Run {
  code: number | null;
  output: string;
}

let tmp: string;
const running = new Set<ChildProcess>();

function runDemo(onOutput?: (output: string, child: ChildProcess) => void): Promise<Run> {
  const env: NodeJS.ProcessEnv = { ...process.env, TMPDIR: tmp, SIZE: '5' };
  for (const k of Object.keys(env)) if (k.startsWith('KL_') || k.startsWith('TF_')) delete env[k];
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
  const timer = setTimeout(() => process.kill(-child.pid!, 'SIGKILL'), 230_000);
  return new Promise((resolve) =>
    child.on('close', (code) => {
      clearTimeout(timer);
      running.delete(child);
      resolve({ code, output });
    }),
  );
}

/** The text of one `== N. …` step, up to the next. */
function section(output: string, heading: string): string {
  const at = output.indexOf(`\n== ${heading}`);
  expect(at).toBeGreaterThanOrEqual(0);
  const next = output.indexOf('\n== ', at + 1);
  return output.slice(at, next < 0 ? undefined : next);
}

function leftovers(): { files: string[]; processes: number[] } {
  return { files: fs.readdirSync(tmp), processes: processesMatching(tmp) };
}

beforeEach(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-engine-demo-test-'));
  fs.chmodSync(tmp, 0o711); // as root, the embedded server's postgres user must enter it
});

afterEach(() => {
  for (const child of running) process.kill(-child.pid!, 'SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });
});

describe('examples/big-state/state-engine-demo.sh', () => {
  it('expands the scope, applies on the trusted lane, falls back when it cannot prove, moves, removes and rolls back, and cleans up', async () => {
    const run = await runDemo();
    expect({ code: run.code, output: run.output }).toEqual({ code: 0, output: run.output });

    // 5 × 2 + 8 instances; terraform agrees after the first apply and each write.
    const agreements = run.output.match(/terraform agrees: state pull = kld's document/g) ?? [];
    expect(agreements).toHaveLength(4);

    const scope = section(run.output, '2. scope expansion');
    expect(scope).toContain('Scope expansion: provably safe');
    expect(scope).toMatch(/undeployed\s+terraform_data\.canary_support \(never in this state/);
    expect(scope).toMatch(/slice: 3 of 18 instances, [\d.]+ (B|KiB) fetched/);
    expect(scope).toContain('Lane: state-engine (trusted');

    const trusted = section(run.output, '3. trusted native apply');
    expect(trusted).toContain('terraform sees the state locked by a state-engine apply');
    expect(trusted).toMatch(/\(source=state-engine, run=[0-9a-f-]{36}, lane=state-engine\)/);

    const fallback = section(run.output, '4. an unprovable scope');
    expect(fallback).toContain('Scope expansion: NOT provably safe');
    expect(fallback).toMatch(/unknown\s+module\.canary_herd/);
    expect(fallback).toContain('Lane: full');
    expect(fallback).toContain('so kl falls back to the full-trunk lane');

    const mv = section(run.output, '5. kl state mv');
    expect(mv).toContain('~ terraform_data.canary -> terraform_data.canary_moved');
    expect(mv).toContain('dry run: nothing changed');
    // terraform state list between the move and the move back.
    expect(mv).toContain('\nterraform_data.canary_moved\nterraform_data.canary_support\n');

    const rm = section(run.output, '6. kl state rm');
    expect(rm).toContain('- terraform_data.canary');
    expect(rm).toContain('dry run: nothing changed');
    expect(rm.split('grep canary:')[1].trim()).toBe('terraform_data.canary_support');

    const rollback = section(run.output, '7. kl rollback resource');
    expect(rollback).toMatch(/\+ terraform_data\.canary \(as at serial \d+/);
    expect(rollback).toMatch(/rollback resource: committed version \d+/);

    // kl history: the terraform apply, then one state-engine version per write.
    const history = section(run.output, `kl history state-engine-demo`);
    const sources = [...history.matchAll(/│ \d+\s+│[^\n]*?│ (http|state-engine|apply)\s/g)].map(
      (m) => m[1],
    );
    expect(sources).toEqual([
      'http',
      'state-engine', // kl apply on the trusted lane
      'state-engine', // mv
      'state-engine', // mv back
      'state-engine', // rm
      'state-engine', // rollback
    ]);
    const runs = section(run.output, 'kl runs state-engine-demo');
    expect(runs.match(/demo@ops,committed,state-engine/g)).toHaveLength(5);

    expect(leftovers()).toEqual({ files: [], processes: [] });
  });

  it('stops its kld and PostgreSQL and removes its files when interrupted (Ctrl-C)', async () => {
    let sent = false;
    const run = await runDemo((output, child) => {
      if (!sent && output.includes('kld ready at')) {
        sent = true;
        process.kill(-child.pid!, 'SIGINT');
      }
    });
    expect(sent).toBe(true);
    expect(run.code).not.toBe(0);
    expect(run.output).not.toContain('== 2.');
    expect(leftovers()).toEqual({ files: [], processes: [] });
  });
});
