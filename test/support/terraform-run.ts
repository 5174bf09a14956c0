import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

export const TERRAFORM = process.env.KL_TEST_TERRAFORM ?? 'terraform';

export interface TfRun {
  code: number | null;
  /** stdout + stderr, ANSI colours removed. */
  out: string;
}

/**
 * Terraform offline, for suites that only use built-in resources: its own
 * CLI config in `root`, no checkpoint, no TF_/KL_ variables inherited.
 */
export class Terraform {
  private readonly running = new Set<ChildProcess>();
  private readonly env: NodeJS.ProcessEnv;

  constructor(root: string) {
    const version = spawnSync(TERRAFORM, ['version'], { encoding: 'utf8' });
    if (version.error || version.status !== 0) {
      throw new Error(`terraform is required for this suite ("${TERRAFORM} version" failed)`);
    }
    const tfrc = path.join(root, 'terraformrc.hcl');
    fs.writeFileSync(tfrc, 'disable_checkpoint = true\n');
    const inherited = Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !k.startsWith('TF_') && !k.startsWith('KL_')),
    );
    this.env = {
      ...inherited,
      TF_CLI_CONFIG_FILE: tfrc,
      CHECKPOINT_DISABLE: '1',
      TF_IN_AUTOMATION: '1',
      TF_INPUT: '0',
    };
  }

  run(dir: string, args: string[], env: Record<string, string> = {}): Promise<TfRun> {
    return new Promise((resolve) => {
      const child = spawn(TERRAFORM, args, {
        cwd: dir,
        env: { ...this.env, ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      this.running.add(child);
      let out = '';
      child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
      child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
      const timer = setTimeout(() => child.kill('SIGKILL'), 90_000);
      const done = (code: number | null) => {
        clearTimeout(timer);
        this.running.delete(child);
        // eslint-disable-next-line no-control-regex
        resolve({ code, out: out.replace(/\x1b\[[0-9;]*m/g, '') });
      };
      child.on('error', (err) => {
        out += `\nspawn failed: ${err.message}`;
        done(null);
      });
      child.on('close', done);
    });
  }

  /** Like `run`, but throws with terraform's output unless it exits 0. */
  async ok(dir: string, args: string[], env: Record<string, string> = {}): Promise<TfRun> {
    const r = await this.run(dir, args, env);
    if (r.code !== 0) throw new Error(`terraform ${args.join(' ')}: exit ${r.code}\n${r.out}`);
    return r;
  }

  killAll(): void {
    for (const child of this.running) child.kill('SIGKILL');
  }
}

/** A resource instance change in a plan, in terraform's machine-readable vocabulary. */
export interface PlannedChange {
  address: string;
  /** create, read, update, replace, delete, remove, … */
  action: string;
}

/**
 * The changes `terraform plan -json` planned, by address: its `planned_change`
 * messages, less the no-ops it reports for an instance that only moved or is
 * imported. The same facts as `show -json`'s non-no-op `resource_changes`,
 * without a second terraform run (which starts the provider for its schema
 * again), except that a replacement does not say which half comes first.
 */
export function plannedChanges(machineOutput: string): PlannedChange[] {
  const changes: PlannedChange[] = [];
  for (const line of machineOutput.split('\n')) {
    if (!line.startsWith('{')) continue;
    const message = JSON.parse(line) as {
      type?: string;
      change?: { resource: { addr: string }; action: string };
    };
    if (message.type !== 'planned_change' || message.change!.action === 'noop') continue;
    changes.push({ address: message.change!.resource.addr, action: message.change!.action });
  }
  return changes.sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0));
}
