import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

/**
 * The kltest provider, driven by the real terraform binary: if Terraform
 * accepts it for the whole resource lifecycle, our protocol-6 facts are right.
 */

const PROVIDER = resolve(__dirname, '../support/provider/terraform-provider-kltest');
const COMMAND_TIMEOUT_MS = 120_000;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

interface StateInstance {
  schema_version: number;
  attributes: Record<string, unknown>;
}

interface StateResource {
  mode: string;
  type: string;
  name: string;
  instances: StateInstance[];
}

interface StateFile {
  serial: number;
  resources: StateResource[];
}

function requireTerraform(): void {
  const probe = spawnSync('terraform', ['version'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) {
    throw new Error(
      'terraform (1.11.x) must be on PATH for this suite: ' +
        (probe.error?.message ?? probe.stderr),
    );
  }
}

describe('kltest provider under terraform (plugin protocol 6)', () => {
  let root: string;
  let workDir: string;
  let objectsDir: string;
  let socketDir: string;
  let env: NodeJS.ProcessEnv;

  const terraform = (
    args: string[],
    cwd = workDir,
    options: {
      env?: NodeJS.ProcessEnv;
      onOutput?: (child: ChildProcess, text: string) => void;
    } = {},
  ): Promise<Run> =>
    new Promise((done, fail) => {
      const child = spawn('terraform', [...args, '-no-color'], {
        cwd,
        env: { ...env, ...options.env },
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk: Buffer) => {
        stdout += chunk.toString();
        options.onOutput?.(child, stdout);
      });
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const timer = setTimeout(() => child.kill('SIGKILL'), COMMAND_TIMEOUT_MS);
      child.on('error', fail);
      child.on('close', (code) => {
        clearTimeout(timer);
        done({ code, stdout, stderr });
      });
    });

  const succeed = async (args: string[], cwd?: string): Promise<Run> => {
    const run = await terraform(args, cwd);
    if (run.code !== 0) {
      throw new Error(
        `terraform ${args.join(' ')} exited ${run.code}\n${run.stdout}\n${run.stderr}`,
      );
    }
    return run;
  };

  const pullState = async (): Promise<StateFile> =>
    JSON.parse((await succeed(['state', 'pull'])).stdout) as StateFile;

  const instanceOf = (state: StateFile, type: string, name: string): StateInstance => {
    const resource = state.resources.find(
      (r) => r.mode === 'managed' && r.type === type && r.name === name,
    );
    if (!resource) throw new Error(`${type}.${name} is not in the state`);
    return resource.instances[0];
  };

  const objectFiles = (type: string): string[] => {
    const dir = join(objectsDir, type);
    return existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.json')) : [];
  };

  const objectPath = (type: string, id: string): string => join(objectsDir, type, `${id}.json`);

  const readObject = (type: string, id: string): Record<string, unknown> =>
    JSON.parse(readFileSync(objectPath(type, id), 'utf8')) as Record<string, unknown>;

  const writeObject = (type: string, id: string, body: Record<string, unknown>): void => {
    mkdirSync(join(objectsDir, type), { recursive: true });
    writeFileSync(objectPath(type, id), JSON.stringify(body));
  };

  const providerBlock = (): string => `
terraform {
  required_providers {
    kltest = { source = "kilolock/kltest", version = "0.1.0" }
  }
}

provider "kltest" {
  state_dir = "${objectsDir}"
}
`;

  const writeConfig = (extra = ''): void =>
    writeFileSync(
      join(workDir, 'main.tf'),
      `${providerBlock()}
resource "kltest_item" "a" {
  name    = "alpha"
  comment = "hello"
  tags    = ["red", "green"]
  payload = { count = 2, names = ["x", "y"], nested = { on = true } }
  secret  = "hunter2-top-secret"

  rule {
    port     = 80
    protocol = "tcp"
  }
  rule {
    port = 443
  }

  settings {
    enabled = true
    level   = 3
  }
}

resource "kltest_bucket" "b" {
  name   = "bucket-of-\${kltest_item.a.id}"
  size   = 1.5
  labels = { env = "dev" }
}

data "kltest_item" "a" {
  id = kltest_item.a.id
}

output "item_name" {
  value = data.kltest_item.a.name
}
${extra}`,
    );

  const itemId = async (): Promise<string> =>
    String(instanceOf(await pullState(), 'kltest_item', 'a').attributes.id);

  beforeAll(async () => {
    requireTerraform();
    root = mkdtempSync(join(tmpdir(), 'kltest-e2e-'));
    workDir = join(root, 'work');
    objectsDir = join(root, 'objects');
    socketDir = join(root, 'sockets');
    const mirror = join(root, 'mirror');
    const platformDir = join(mirror, 'registry.terraform.io/kilolock/kltest/0.1.0/linux_amd64');
    for (const dir of [workDir, objectsDir, socketDir, platformDir]) {
      mkdirSync(dir, { recursive: true });
    }
    symlinkSync(PROVIDER, join(platformDir, 'terraform-provider-kltest_v0.1.0'));
    const cliConfig = join(root, 'terraformrc');
    writeFileSync(
      cliConfig,
      `provider_installation {\n  filesystem_mirror {\n    path = "${mirror}"\n  }\n}\n`,
    );
    env = {
      ...process.env,
      TF_CLI_CONFIG_FILE: cliConfig,
      CHECKPOINT_DISABLE: '1',
      TF_IN_AUTOMATION: '1',
      // go-plugin puts provider sockets in TMPDIR: a private one lets us check for leftovers.
      TMPDIR: socketDir,
      KLTEST_RPC_LOG: join(root, 'rpc.log'),
    };
    delete env.TF_LOG;
    writeConfig();
  });

  afterAll(() => {
    if (root) rmSync(root, { recursive: true, force: true });
  });

  it('installs the provider from a filesystem mirror', async () => {
    const run = await succeed(['init', '-input=false']);
    expect(run.stdout).toContain('Installed kilolock/kltest v0.1.0');
  });

  it('creates objects from nested blocks, a set, a dynamic value and a sensitive attribute', async () => {
    const run = await succeed(['apply', '-auto-approve', '-input=false']);

    expect(run.stdout).toContain('Apply complete! Resources: 2 added');
    expect(run.stdout).not.toContain('hunter2-top-secret');
    expect(run.stdout).toMatch(/item_name = "alpha"/);
    const id = await itemId();
    expect(objectFiles('kltest_item')).toEqual([`${id}.json`]);
    const remote = readObject('kltest_item', id);
    expect(remote).toMatchObject({
      name: 'alpha',
      secret: 'hunter2-top-secret',
      rule: [
        { port: 80, protocol: 'tcp' },
        { port: 443, protocol: null },
      ],
      settings: { enabled: true, level: 3 },
      payload: { value: { count: 2, names: ['x', 'y'], nested: { on: true } } },
    });
    expect([...(remote.tags as string[])].sort()).toEqual(['green', 'red']);
    expect(
      readObject(
        'kltest_bucket',
        String(instanceOf(await pullState(), 'kltest_bucket', 'b').attributes.id),
      ),
    ).toMatchObject({ name: `bucket-of-${id}`, size: 1.5 });
  });

  it('plans no changes on a second run', async () => {
    const run = await terraform(['plan', '-detailed-exitcode', '-input=false']);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('No changes.');
  });

  it('sees an out-of-band edit as drift and records it on refresh-only apply', async () => {
    const id = await itemId();
    writeObject('kltest_item', id, { ...readObject('kltest_item', id), comment: 'edited outside' });

    const plan = await terraform(['plan', '-refresh-only', '-detailed-exitcode', '-input=false']);
    expect(plan.code).toBe(2);
    expect(plan.stdout).toContain('comment = "hello" -> "edited outside"');
    expect(instanceOf(await pullState(), 'kltest_item', 'a').attributes.comment).toBe('hello');

    await succeed(['apply', '-refresh-only', '-auto-approve', '-input=false']);
    expect(instanceOf(await pullState(), 'kltest_item', 'a').attributes.comment).toBe(
      'edited outside',
    );
  });

  it('puts an edited object back in line with the configuration', async () => {
    const run = await succeed(['apply', '-auto-approve', '-input=false']);
    expect(run.stdout).toContain('1 changed');
    expect(readObject('kltest_item', await itemId()).comment).toBe('hello');
  });

  it('recreates an object deleted out of band', async () => {
    const bucket = instanceOf(await pullState(), 'kltest_bucket', 'b');
    rmSync(objectPath('kltest_bucket', String(bucket.attributes.id)));

    const plan = await terraform(['plan', '-detailed-exitcode', '-input=false']);
    expect(plan.code).toBe(2);
    expect(plan.stdout).toContain('kltest_bucket.b will be created');

    await succeed(['apply', '-auto-approve', '-input=false']);
    expect(objectFiles('kltest_bucket')).toHaveLength(1);
  });

  it('upgrades a state written at schema version 0 on refresh', async () => {
    const state = await pullState();
    const item = instanceOf(state, 'kltest_item', 'a');
    const { comment, ...rest } = item.attributes;
    item.schema_version = 0;
    item.attributes = { ...rest, note: comment };
    state.serial += 1;
    writeFileSync(join(root, 'v0.tfstate'), JSON.stringify(state));
    await succeed(['state', 'push', join(root, 'v0.tfstate')]);
    expect(instanceOf(await pullState(), 'kltest_item', 'a').schema_version).toBe(0);

    // Without the upgrader `comment` would be null here and the plan would show a change.
    const plan = await terraform(['plan', '-refresh=false', '-detailed-exitcode', '-input=false']);
    expect(plan.code).toBe(0);

    await succeed(['apply', '-refresh-only', '-auto-approve', '-input=false']);
    const upgraded = instanceOf(await pullState(), 'kltest_item', 'a');
    expect(upgraded.schema_version).toBe(1);
    expect(upgraded.attributes.comment).toBe('hello');
    expect(upgraded.attributes).not.toHaveProperty('note');
  });

  it('imports an existing object', async () => {
    writeObject('kltest_bucket', 'bucket-legacy', {
      id: 'bucket-legacy',
      name: 'legacy',
      size: 7,
      labels: { team: 'ops' },
    });
    writeConfig(`
resource "kltest_bucket" "legacy" {
  name   = "legacy"
  size   = 7
  labels = { team = "ops" }
}
`);

    const missing = await terraform(['import', '-input=false', 'kltest_bucket.legacy', 'nope']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('Cannot import non-existent remote object');

    await succeed(['import', '-input=false', 'kltest_bucket.legacy', 'bucket-legacy']);
    const imported = instanceOf(await pullState(), 'kltest_bucket', 'legacy');
    expect(imported.attributes).toMatchObject({ id: 'bucket-legacy', name: 'legacy', size: 7 });
    const plan = await terraform(['plan', '-detailed-exitcode', '-input=false']);
    expect(plan.code).toBe(0);
  });

  it('reports provider validation errors against the offending attribute', async () => {
    const dir = join(root, 'invalid');
    mkdirSync(dir);
    writeFileSync(
      join(dir, 'main.tf'),
      `${providerBlock()}
resource "kltest_item" "bad" {
  name = "bad"
  rule {
    port = 70000
  }
}
`,
    );
    await succeed(['init', '-input=false'], dir);
    const run = await terraform(['validate'], dir);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('Invalid port');
    expect(run.stderr).toContain('port must be between 1 and 65535, got 70000');
  });

  it('cancels a slow refresh through StopProvider when terraform is interrupted', async () => {
    // Long enough that only a cancelled read ends in half of it, even on a loaded machine.
    const readDelayMs = 120_000;
    const started = Date.now();
    let interrupted = false;
    const run = await terraform(['plan', '-input=false'], workDir, {
      env: { KLTEST_READ_DELAY_MS: String(readDelayMs) },
      onOutput: (child, stdout) => {
        if (!interrupted && stdout.includes('Refreshing state...')) {
          interrupted = true;
          // Give the refresh time to reach the provider before Ctrl-C.
          setTimeout(() => child.kill('SIGINT'), 1000);
        }
      },
    });

    expect(interrupted).toBe(true);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('Read cancelled');
    expect(Date.now() - started).toBeLessThan(readDelayMs / 2);
    expect(readFileSync(env.KLTEST_RPC_LOG!, 'utf8')).toContain('StopProvider');
  });

  it('destroys every object', async () => {
    const run = await succeed(['destroy', '-auto-approve', '-input=false']);
    expect(run.stdout).toContain('Destroy complete! Resources: 3 destroyed');
    expect(objectFiles('kltest_item')).toEqual([]);
    expect(objectFiles('kltest_bucket')).toEqual([]);
    expect((await pullState()).resources).toEqual([]);
  });

  it('leaves no provider process and no socket file behind', () => {
    expect(liveProvidersUsing(env.KLTEST_RPC_LOG!)).toEqual([]);
    expect(readdirSync(socketDir)).toEqual([]);
  });
});

/** Live (non-zombie) kltest processes started for this suite, found by their environment. */
function liveProvidersUsing(marker: string): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number)
    .filter((pid) => {
      try {
        const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
        const environ = readFileSync(`/proc/${pid}/environ`, 'utf8');
        const state = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0];
        return (
          cmdline.includes('terraform-provider-kltest') &&
          environ.includes(`KLTEST_RPC_LOG=${marker}\0`) &&
          state !== 'Z'
        );
      } catch {
        return false;
      }
    });
}
