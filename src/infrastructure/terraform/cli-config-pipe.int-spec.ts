import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { onPath } from '../../../test/support/terraform-aws';
import { CliConfigPipe, cliConfigText } from './cli-config-pipe';
import { makeNamedPipes } from './named-pipes';

/** Real terraform reading its CLI configuration from kl's pipe. */
describe('CliConfigPipe', () => {
  let tmp: string;
  let terraform: string;
  beforeAll(() => {
    terraform = onPath('terraform', 'terraform reads its CLI configuration from the pipe');
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-cli-pipe-'));
  });
  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

  let n = 0;
  async function held(): Promise<{
    pipe: CliConfigPipe;
    exited: () => boolean;
    done: Promise<{ code: number | null; output: string }>;
    pid: number;
  }> {
    const file = path.join(tmp, `cli-${++n}.tfrc`);
    expect(await makeNamedPipes([file])).toBe(true);
    const pipe = CliConfigPipe.open(file)!;
    const child = spawn(terraform, ['version'], {
      env: { ...process.env, CHECKPOINT_DISABLE: '1', TF_CLI_CONFIG_FILE: file },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    let exited = false;
    for (const s of [child.stdout, child.stderr]) s.on('data', (c: Buffer) => (output += c));
    const done = new Promise<{ code: number | null; output: string }>((resolve) =>
      child.on('close', (code) => {
        exited = true;
        resolve({ code, output });
      }),
    );
    return { pipe, exited: () => exited, done, pid: child.pid! };
  }

  it('holds terraform until released, then terraform reads exactly what kl wrote', async () => {
    const t = await held();
    // Held: after a while terraform still waits for its configuration.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(t.exited()).toBe(false);
    const text = 'plugin_cache_dir = "/kl-test-no-such-cache"\n';
    expect(await t.pipe.release(text, t.exited)).toBe(true);
    const { code, output } = await t.done;
    expect(code).toBe(0);
    // terraform checked the setting it read from the pipe
    expect(output).toContain('plugin cache dir /kl-test-no-such-cache cannot be opened');
  });

  it('hands on an empty configuration as none, also when released before terraform reads', async () => {
    const t = await held();
    expect(await t.pipe.release('', t.exited)).toBe(true); // at once: terraform is still starting
    const { code, output } = await t.done;
    expect(code).toBe(0);
    expect(output).toMatch(/^Terraform v\d/);
    expect(output).not.toContain('problems with the CLI configuration');
  });

  it('answers false when terraform is gone before reading', async () => {
    const t = await held();
    process.kill(t.pid, 'SIGKILL');
    await t.done;
    expect(await t.pipe.release('disable_checkpoint = true\n', t.exited)).toBe(false);
  });

  it('answers false when terraform has not read within the limit', async () => {
    const file = path.join(tmp, 'nobody.tfrc');
    expect(await makeNamedPipes([file])).toBe(true);
    const pipe = CliConfigPipe.open(file)!;
    expect(await pipe.release('disable_checkpoint = true\n', () => false, 20)).toBe(false);
  });
});

describe('cliConfigText', () => {
  let home: string;
  beforeEach(() => (home = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-cli-home-'))));
  afterEach(() => fs.rmSync(home, { recursive: true, force: true }));

  it('is the file TF_CLI_CONFIG_FILE (or TERRAFORM_CONFIG) names, none when it is missing', () => {
    const file = path.join(home, 'rc');
    fs.writeFileSync(file, 'disable_checkpoint = true\n');
    expect(cliConfigText({ HOME: home, TF_CLI_CONFIG_FILE: file })).toBe(
      'disable_checkpoint = true\n',
    );
    expect(cliConfigText({ HOME: home, TERRAFORM_CONFIG: file })).toBe(
      'disable_checkpoint = true\n',
    );
    expect(cliConfigText({ HOME: home, TF_CLI_CONFIG_FILE: path.join(home, 'missing') })).toBe('');
    // set, the variable hides the configuration directory, as terraform ignores it then
    fs.mkdirSync(path.join(home, '.terraform.d'));
    fs.writeFileSync(path.join(home, '.terraform.d', 'credentials.tfrc.json'), '{}');
    expect(cliConfigText({ HOME: home, TF_CLI_CONFIG_FILE: file })).toBe(
      'disable_checkpoint = true\n',
    );
  });

  it('is ~/.terraformrc when nothing is set, or null when ~/.terraform.d adds files', () => {
    expect(cliConfigText({ HOME: home })).toBe('');
    fs.writeFileSync(path.join(home, '.terraformrc'), 'plugin_cache_dir = "/x"\n');
    expect(cliConfigText({ HOME: home })).toBe('plugin_cache_dir = "/x"\n');
    fs.mkdirSync(path.join(home, '.terraform.d', 'plugins'), { recursive: true });
    expect(cliConfigText({ HOME: home })).toBe('plugin_cache_dir = "/x"\n');
    fs.writeFileSync(path.join(home, '.terraform.d', 'credentials.tfrc.json'), '{}');
    expect(cliConfigText({ HOME: home })).toBeNull();
  });

  it('is null where OpenTofu would read a file or variable of its own', () => {
    expect(cliConfigText({ HOME: home, TOFU_CLI_CONFIG_FILE: path.join(home, 'rc') })).toBeNull();
    expect(cliConfigText({ HOME: home, XDG_CONFIG_HOME: path.join(home, 'xdg') })).toBe('');
    fs.mkdirSync(path.join(home, 'xdg', 'opentofu'), { recursive: true });
    expect(cliConfigText({ HOME: home, XDG_CONFIG_HOME: path.join(home, 'xdg') })).toBeNull();
    fs.writeFileSync(path.join(home, '.tofurc'), '');
    expect(cliConfigText({ HOME: home })).toBeNull();
    // a variable both read decides for both
    const file = path.join(home, 'rc');
    fs.writeFileSync(file, 'disable_checkpoint = true\n');
    expect(cliConfigText({ HOME: home, TF_CLI_CONFIG_FILE: file })).toBe(
      'disable_checkpoint = true\n',
    );
  });

  it('is null for what is not one readable file', () => {
    expect(cliConfigText({ HOME: home, TF_CLI_CONFIG_FILE: home })).toBeNull(); // a directory
  });
});
