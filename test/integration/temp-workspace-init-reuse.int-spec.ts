import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  TERRAFORM_FAILED,
  TerraformWorkspace,
} from '../../src/application/apply/terraform-workspace.port';
import { StateDocumentV4 } from '../../src/domain/terraform';
import { TempWorkspaces } from '../../src/infrastructure/terraform/temp-workspace';
import {
  awsVersionIn,
  findTerraformMirror,
  onPath,
  writeMirrorCliConfig,
} from '../support/terraform-aws';

/**
 * A slow writer: while armed, kl's asynchronous writes (fs/promises
 * writeFile) wait for `gate` before they start, each listed in `pending`
 * meanwhile; so a test sees which are still under way at a given moment,
 * whatever the machine's load.
 */
const mockSlowWrites: { armed: { gate: Promise<void>; pending: Set<string> } | null } = {
  armed: null,
};
jest.mock('node:fs/promises', () => {
  const actual = jest.requireActual<typeof import('node:fs/promises')>('node:fs/promises');
  return {
    ...actual,
    writeFile: async (...args: Parameters<typeof actual.writeFile>) => {
      const held = mockSlowWrites.armed;
      if (held === null) return actual.writeFile(...args);
      const file = String(args[0]);
      held.pending.add(file);
      try {
        await held.gate;
        return await actual.writeFile(...args);
      } finally {
        held.pending.delete(file);
      }
    },
  };
});

/**
 * kl's private terraform directory reuses the user's `terraform init`
 * (lock file, installed providers, module manifest) instead of running its
 * own, and falls back to a fresh init whenever terraform finds the reused
 * initialisation does not fit. Real terraform, offline; a wrapper records
 * which terraform commands kl ran.
 */
describe('TempWorkspaces: reusing the user terraform init', () => {
  const saved = { ...process.env };
  let tmp: string;
  let log: string;
  let terraform: string;
  let cliConfig: string;

  const EMPTY: StateDocumentV4 = {
    version: 4,
    terraform_version: '1.11.4',
    serial: 1,
    lineage: '7a1c2a3e-0000-4000-8000-000000000015',
    outputs: {},
    resources: [],
  };

  beforeAll(() => {
    terraform = onPath('terraform', 'terraform plans in kl workspaces');
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-init-reuse-'));
    cliConfig = path.join(tmp, 'terraformrc');
    fs.writeFileSync(cliConfig, 'disable_checkpoint = true\n');
    log = path.join(tmp, 'commands.log');
    const wrapper = path.join(tmp, 'terraform-logged');
    fs.writeFileSync(
      wrapper,
      `#!/bin/sh\necho "$1" >> ${JSON.stringify(log)}\nexec ${JSON.stringify(terraform)} "$@"\n`,
      { mode: 0o755 },
    );
    process.env.KL_TERRAFORM = wrapper;
    process.env.TF_CLI_CONFIG_FILE = cliConfig;
    process.env.CHECKPOINT_DISABLE = '1';
    delete process.env.TF_PLUGIN_CACHE_DIR;
  });

  afterAll(() => {
    process.env = saved;
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  beforeEach(() => fs.rmSync(log, { force: true }));
  afterEach(() => (mockSlowWrites.armed = null));

  const commands = (): string[] =>
    fs.existsSync(log) ? fs.readFileSync(log, 'utf8').trim().split('\n') : [];

  /** A user's directory with a local module, initialised by their own `terraform init`. */
  function userDir(name: string, main: string): string {
    const dir = path.join(tmp, name);
    fs.mkdirSync(path.join(dir, 'mod'), { recursive: true });
    fs.writeFileSync(
      path.join(dir, 'mod', 'main.tf'),
      'variable "n" {}\nresource "terraform_data" "item" {\n  input = var.n\n}\n',
    );
    fs.writeFileSync(path.join(dir, 'main.tf'), main);
    execFileSync(terraform, ['init', '-input=false', '-no-color'], {
      cwd: dir,
      env: process.env,
      stdio: 'ignore',
    });
    return dir;
  }

  /** kl's plan of `main` (the root module's one file) in a private directory for `dir`. */
  async function planIn(dir: string, main: string): Promise<Record<string, unknown>> {
    const workspace = await new TempWorkspaces().open(dir, {
      rootFiles: [{ name: 'main.tf', text: main }],
      state: EMPTY,
    });
    try {
      await workspace.init();
      return (await workspace.plan({ targets: [], refresh: true })) as Record<string, unknown>;
    } finally {
      await workspace.dispose();
    }
  }

  const planned = (plan: Record<string, unknown>) =>
    (plan.resource_changes as { address: string; change: { actions: string[]; after: unknown } }[])
      .map((c) => ({ address: c.address, actions: c.change.actions, after: c.change.after }))
      .sort((x, y) => x.address.localeCompare(y.address));

  const MAIN =
    'module "a" {\n  source = "./mod"\n  n      = 1\n}\n' +
    'resource "terraform_data" "top" {\n  input = module.a\n}\n';

  it('plans an initialised directory without terraform init, the same plan a fresh init gives', async () => {
    const dir = userDir('initialised', MAIN);
    const reused = await planIn(dir, MAIN);
    expect(commands()).toEqual(['plan', 'show']);

    // The same configuration never initialised: kl has to run terraform init itself.
    const bare = path.join(tmp, 'never-initialised');
    fs.cpSync(dir, bare, {
      recursive: true,
      filter: (src) => !src.split(path.sep).includes('.terraform'),
    });
    fs.rmSync(log, { force: true });
    const fresh = await planIn(bare, MAIN);
    expect(commands()).toEqual(['init', 'plan', 'show']);

    expect(planned(reused)).toEqual(planned(fresh));
    expect(planned(reused).map((c) => c.address)).toEqual([
      'module.a.terraform_data.item',
      'terraform_data.top',
    ]);
    expect(reused.configuration).toEqual(fresh.configuration);
  });

  it('runs a fresh init when the configuration calls a module the user has not installed', async () => {
    const dir = userDir('stale-manifest', MAIN);
    const manifest = path.join(dir, '.terraform', 'modules', 'modules.json');
    const before = fs.readFileSync(manifest, 'utf8');
    const grown = MAIN + 'module "b" {\n  source = "./mod"\n  n      = 2\n}\n';

    const plan = await planIn(dir, grown);

    // terraform refused the reused manifest ("Module not installed"), the fresh init fixed it.
    expect(commands()).toEqual(['plan', 'init', 'plan', 'show']);
    expect(planned(plan).map((c) => c.address)).toEqual([
      'module.a.terraform_data.item',
      'module.b.terraform_data.item',
      'terraform_data.top',
    ]);
    // The user's own initialisation is left as it was.
    expect(fs.readFileSync(manifest, 'utf8')).toBe(before);
  });

  it('reports a configuration error once it is sure init is not the cause', async () => {
    const dir = userDir('broken', MAIN);
    const broken = MAIN + 'resource "terraform_data" "bad" {\n  input = var.missing\n}\n';
    await expect(planIn(dir, broken)).rejects.toMatchObject({
      code: TERRAFORM_FAILED,
      message: expect.stringContaining('Reference to undeclared input variable') as string,
    });
    expect(commands()).toEqual(['plan', 'init', 'plan']);
  });

  describe('terraform plan started before the state arrives (a named pipe)', () => {
    // The module call makes the user's terraform init write a .terraform directory to reuse.
    const TOP =
      'module "a" {\n  source = "./mod"\n  n      = 1\n}\n' +
      'resource "terraform_data" "top" {\n  input = "x"\n}\n';
    const WITH_TOP: StateDocumentV4 = {
      ...EMPTY,
      serial: 4,
      resources: [
        {
          mode: 'managed',
          type: 'terraform_data',
          name: 'top',
          provider: 'provider["terraform.io/builtin/terraform"]',
          instances: [
            {
              schema_version: 0,
              attributes: {
                id: 'c0ffee00-0000-4000-8000-000000000015',
                input: { value: 'x', type: 'string' },
                output: { value: 'x', type: 'string' },
                triggers_replace: null,
              },
              sensitive_attributes: [],
            },
          ],
        },
      ],
    };

    /** The commands the wrapper logged, by first word, in name order (plan and show start together). */
    const ranSorted = () =>
      commands()
        .map((l) => l.split(' ')[0])
        .sort();

    /**
     * A plan whose contents fail (`fail`) while terraform plan and the held show wait for
     * them: it fails with `failure`, both processes are gone (and reaped), nothing else ran.
     */
    async function expectFailedWhileWaiting(
      workspace: Awaited<ReturnType<TempWorkspaces['open']>>,
      fail: () => void,
      failure: Error,
    ): Promise<void> {
      await workspace.init();
      const planning = workspace.plan({ targets: [], refresh: true });
      const pids = [await started('plan'), await started('show')];
      fail();
      await expect(planning).rejects.toBe(failure);
      expectGone(pids);
      expect(ranSorted()).toEqual(['plan', 'show']);
    }

    /** Every one of `pids` has exited and been reaped. */
    function expectGone(pids: number[]): void {
      for (const pid of pids) {
        expect(() => process.kill(pid, 0)).toThrow(expect.objectContaining({ code: 'ESRCH' }));
      }
    }

    /** Resolves once the wrapper has logged a terraform command whose first word is `command`. */
    async function started(command: string): Promise<number> {
      for (;;) {
        const line = commands().find((l) => l.startsWith(`${command} `));
        if (line) return Number(line.split(' ')[1]);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    }

    beforeAll(() => {
      // This wrapper also logs terraform's process id (exec keeps it).
      fs.writeFileSync(
        process.env.KL_TERRAFORM!,
        `#!/bin/sh\necho "$1 $$" >> ${JSON.stringify(log)}\nexec ${JSON.stringify(terraform)} "$@"\n`,
      );
    });

    afterAll(() =>
      fs.writeFileSync(
        process.env.KL_TERRAFORM!,
        `#!/bin/sh\necho "$1" >> ${JSON.stringify(log)}\nexec ${JSON.stringify(terraform)} "$@"\n`,
      ),
    );

    it('plans on the state kl gives it once it has it, and leaves the state as a file', async () => {
      const dir = userDir('early', TOP);
      let arrive!: (state: StateDocumentV4) => void;
      const state = new Promise<StateDocumentV4>((resolve) => (arrive = resolve));
      const workspace = await new TempWorkspaces().open(dir, {
        rootFiles: [{ name: 'main.tf', text: TOP }],
        state,
      });
      try {
        await workspace.init();
        const planning = workspace.plan({ targets: [], refresh: true });
        await started('plan');
        // terraform show starts beside the plan (held at its CLI configuration until the plan
        // file is there), before the state has even arrived, yielding the CPU to the plan
        const show = await started('show');
        expect(os.getPriority(show)).toBe(os.getPriority(await started('plan')) + 10);
        arrive(WITH_TOP);
        const plan = (await planning) as Record<string, unknown>;
        // Planned on the given state: top is there and unchanged (not a create).
        expect(planned(plan).map((c) => [c.address, c.actions])).toEqual([
          ['module.a.terraform_data.item', ['create']],
          ['terraform_data.top', ['no-op']],
        ]);
        expect(ranSorted()).toEqual(['plan', 'show']);
        expect(workspace.initialisations).toBe(0);
        const file = path.join(workspace.dir, 'terraform.tfstate');
        expect(fs.lstatSync(file).isFile()).toBe(true);
        expect(JSON.parse(fs.readFileSync(file, 'utf8'))).toMatchObject({ serial: 4 });
      } finally {
        await workspace.dispose();
      }
    });

    it('a plan that needs a fresh init reads the same state again', async () => {
      const dir = userDir('early-stale-manifest', TOP);
      const grown = TOP + 'module "b" {\n  source = "./mod"\n  n      = 2\n}\n';
      const workspace = await new TempWorkspaces().open(dir, {
        rootFiles: [{ name: 'main.tf', text: grown }],
        state: Promise.resolve(WITH_TOP),
      });
      try {
        await workspace.init();
        expect(workspace.initialisations).toBe(0);
        const modulesBefore = await workspace.moduleDirs();
        const plan = (await workspace.plan({ targets: [], refresh: true })) as Record<
          string,
          unknown
        >;
        // The show started beside the first plan is released after the second: it shows that.
        const ran = commands().map((l) => l.split(' ')[0]);
        expect(ran.filter((c) => c !== 'show')).toEqual(['plan', 'init', 'plan']);
        expect(ran.filter((c) => c === 'show')).toHaveLength(1);
        // What kl read from the directory before the plan is stale: the count says so.
        expect(workspace.initialisations).toBe(1);
        expect([...modulesBefore.keys()].sort()).toEqual(['', 'a']);
        expect([...(await workspace.moduleDirs()).keys()].sort()).toEqual(['', 'a', 'b']);
        expect(planned(plan).map((c) => [c.address, c.actions])).toEqual([
          ['module.a.terraform_data.item', ['create']],
          ['module.b.terraform_data.item', ['create']],
          ['terraform_data.top', ['no-op']],
        ]);
      } finally {
        await workspace.dispose();
      }
    });

    it('interrupted before the state arrives: terraform is killed, nothing waits for the state', async () => {
      const dir = userDir('early-interrupted', TOP);
      const stop = new AbortController();
      const workspace = await new TempWorkspaces().open(dir, {
        rootFiles: [{ name: 'main.tf', text: TOP }],
        state: new Promise<StateDocumentV4>(() => undefined), // never comes
      });
      try {
        await workspace.init(stop.signal);
        const planning = workspace.plan({ targets: [], refresh: true }, stop.signal);
        const pids = [await started('plan'), await started('show')];
        stop.abort();
        await expect(planning).rejects.toMatchObject({ code: 'APPLY.INTERRUPTED' });
        expectGone(pids);
      } finally {
        await workspace.dispose();
      }
    });

    it('when the state never arrives: terraform is killed and the plan fails with its error', async () => {
      const dir = userDir('early-failed', TOP);
      const failure = new Error('the server cannot be reached');
      let fail!: (e: Error) => void;
      const state = new Promise<StateDocumentV4>((_, reject) => (fail = reject));
      const workspace = await new TempWorkspaces().open(dir, {
        rootFiles: [{ name: 'main.tf', text: TOP }],
        state,
      });
      try {
        await expectFailedWhileWaiting(workspace, () => fail(failure), failure);
      } finally {
        await workspace.dispose();
      }
    });

    describe('with the root files still being read (named pipes too)', () => {
      type Contents = { rootFiles: { name: string; text: string }[]; state: StateDocumentV4 };
      /** The user's directory with main.tf and a second root file the scoped files leave out. */
      function scopedDir(name: string): string {
        const dir = userDir(name, TOP);
        fs.writeFileSync(
          path.join(dir, 'other.tf'),
          'resource "terraform_data" "left_out" {\n  input = "y"\n}\n',
        );
        return dir;
      }
      type Pending = { arrive: (c: Contents) => void; fail: (e: Error) => void };
      /** A workspace opened on `scopedDir(name)` with its contents still to come, disposed after. */
      async function withPendingContents(
        name: string,
        body: (workspace: TerraformWorkspace, pending: Pending) => Promise<void>,
      ): Promise<void> {
        let pending!: Pending;
        const contents = new Promise<Contents>((arrive, fail) => (pending = { arrive, fail }));
        const workspace = await new TempWorkspaces().open(scopedDir(name), contents);
        try {
          await body(workspace, pending);
        } finally {
          await workspace.dispose();
        }
      }

      it('starts terraform before they are there; it plans on the files kl gives it, left as files', async () => {
        await withPendingContents('early-roots', async (workspace, { arrive }) => {
          await workspace.init();
          const planning = workspace.plan({ targets: [], refresh: true });
          await started('plan');
          await started('show'); // held beside the plan
          // Long enough for terraform to be reading a root file through its pipe: kl hands the
          // text over to it (and an empty one, for a file the scoped files leave out).
          await new Promise((resolve) => setTimeout(resolve, 1_000));
          arrive({ rootFiles: [{ name: 'main.tf', text: TOP }], state: WITH_TOP });
          const plan = (await planning) as Record<string, unknown>;
          // Only what kl gave it: top unchanged on the given state, nothing of other.tf.
          expect(planned(plan).map((c) => [c.address, c.actions])).toEqual([
            ['module.a.terraform_data.item', ['create']],
            ['terraform_data.top', ['no-op']],
          ]);
          expect(ranSorted()).toEqual(['plan', 'show']);
          for (const name of ['main.tf', 'other.tf', 'terraform.tfstate']) {
            expect(fs.lstatSync(path.join(workspace.dir, name)).isFile()).toBe(true);
          }
          expect(fs.readFileSync(path.join(workspace.dir, 'main.tf'), 'utf8')).toBe(TOP);
          expect(fs.readFileSync(path.join(workspace.dir, 'other.tf'), 'utf8')).toBe('');
          expect([...(await workspace.moduleDirs()).keys()].sort()).toEqual(['', 'a']);
        });
      });

      it('when they cannot be read: terraform is killed and the plan fails with that error', async () => {
        const failure = new Error('marker.tf:3: not valid HCL');
        await withPendingContents('early-roots-failed', (workspace, { fail }) =>
          expectFailedWhileWaiting(workspace, () => fail(failure), failure),
        );
      });

      it('refuses a root file that appeared after kl listed the directory, and stops terraform', async () => {
        await withPendingContents('early-roots-grown', async (workspace, { arrive }) => {
          await workspace.init();
          const planning = workspace.plan({ targets: [], refresh: true });
          const pid = await started('plan');
          // kl's writes are slower than the refusal: one still under way when it is answered
          // lands while the caller removes the directory (ENOTEMPTY in place of the refusal).
          const pending = new Set<string>();
          const answered = planning.then(
            () => [...pending],
            () => [...pending],
          );
          mockSlowWrites.armed = { gate: answered.then(() => undefined), pending };
          arrive({
            rootFiles: [
              { name: 'main.tf', text: TOP },
              { name: 'new.tf', text: 'resource "terraform_data" "new" {}\n' },
            ],
            state: WITH_TOP,
          });
          await expect(planning).rejects.toMatchObject({
            code: 'PLAN.CONFIG_INVALID',
            message: expect.stringContaining('new.tf appeared in the configuration'),
          });
          expect(await answered).toEqual([]);
          expectGone([pid]);
        });
      });
    });
  });

  describe('with a provider (hashicorp/aws from the filesystem mirror)', () => {
    let mirror: string;
    const AWS_MAIN =
      'terraform {\n  required_providers {\n    aws = { source = "hashicorp/aws" }\n  }\n}\n' +
      MAIN;

    beforeAll(() => {
      mirror = findTerraformMirror();
      writeMirrorCliConfig(cliConfig, mirror);
    });

    afterAll(() => fs.writeFileSync(cliConfig, 'disable_checkpoint = true\n'));

    it('reuses the lock file and installed provider of an initialised directory', async () => {
      const dir = userDir('aws-initialised', AWS_MAIN);
      const plan = await planIn(dir, AWS_MAIN);
      expect(commands()).toEqual(['plan', 'show']);
      expect(planned(plan)).toHaveLength(2);
    });

    it('a lock file without the provider forces a fresh init from the installed provider', async () => {
      const dir = userDir('aws-no-lock', AWS_MAIN);
      fs.rmSync(path.join(dir, '.terraform.lock.hcl'));
      const plan = await planIn(dir, AWS_MAIN);
      // "Inconsistent dependency lock file" on the reused init; the fresh one selects the provider.
      expect(commands()).toEqual(['plan', 'init', 'plan', 'show']);
      expect(planned(plan)).toHaveLength(2);
      // kl's init wrote its lock file in its own directory, not the user's.
      expect(fs.existsSync(path.join(dir, '.terraform.lock.hcl'))).toBe(false);
      const version = awsVersionIn(mirror);
      expect(
        fs.readdirSync(path.join(dir, '.terraform/providers/registry.terraform.io/hashicorp/aws')),
      ).toEqual([version]);
    });

    it('a lock file whose checksum no longer matches the provider is never planned with', async () => {
      const dir = userDir('aws-changed-lock', AWS_MAIN);
      const lock = path.join(dir, '.terraform.lock.hcl');
      const text = fs.readFileSync(lock, 'utf8');
      const tampered = text.replace(
        /"h1:[^"]+"/,
        '"h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="',
      );
      expect(tampered).not.toBe(text);
      fs.writeFileSync(lock, tampered);

      await expect(planIn(dir, AWS_MAIN)).rejects.toMatchObject({
        code: TERRAFORM_FAILED,
        message: expect.stringContaining('terraform init failed') as string,
        metadata: {
          output: expect.stringMatching(/doesn't match any of the\s+checksums/) as string,
        },
      });
      // The reused plan was refused by terraform, and so was the fresh init: no plan.
      expect(commands()).toEqual(['plan', 'init']);
      expect(fs.readFileSync(lock, 'utf8')).toBe(tampered);
    });
  });
});
