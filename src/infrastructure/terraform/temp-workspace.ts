import * as fsSync from 'node:fs';
import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { lastError } from '../../application/apply/terraform-output';
import type { ScopedFile } from '../../domain/apply/config-scope';
import {
  ApplyResult,
  TERRAFORM_FAILED,
  TerraformWorkspace,
  TerraformWorkspaces,
  WorkspaceContents,
} from '../../application/apply/terraform-workspace.port';
import { DomainError } from '../../domain/shared/domain-error';
import { stringifyJson } from '../../domain/terraform/lossless-json';
import { CliConfigPipe, cliConfigText } from './cli-config-pipe';
import { CONFIG_INVALID } from './hcl-reader';
import { makeNamedPipes } from './named-pipes';
import { StatePipe } from './state-pipe';
import { runTerraform, terraformEnv, TerraformRun, TerraformRunOptions } from './terraform-cli';

const PLAN_FILE = 'kl.tfplan';
const SHOW_ARGS = ['-json', '-no-color', PLAN_FILE];
/**
 * The held show starts while the plan, kld's answer and kl's own parse want
 * the same cores, and is waited for only after all of them: it yields to
 * them (on two cores the state-engine plan ended 9 ms sooner at the median).
 */
const HELD_SHOW_NICENESS = 10;
const STATE_FILE = 'terraform.tfstate';
/** Where the state's pipe is laid while the configuration is copied. */
const STATE_PIPE = 'state.pipe';
/** The CLI configuration of the `terraform show` started beside `terraform plan`. */
const SHOW_CONFIG_PIPE = 'show.tfrc';
/** Where each root file's pipe is laid meanwhile: `root.<name>`. */
const ROOT_PIPE = 'root.';
/** Sorted after any user `*.auto.tfvars*`, so the planned values win. */
const PINNED_VARIABLES = 'zz-kl-plan.auto.tfvars.json';
const SKIPPED = new Set(['.terraform', '.git', 'node_modules']);

interface ModuleManifest {
  Modules?: { Key?: string; Dir?: string }[];
}

/** Directories of local modules that live outside the configuration directory. */
function outsideModuleDirs(configDir: string): string[] {
  let manifest: ModuleManifest;
  try {
    manifest = JSON.parse(
      fsSync.readFileSync(path.join(configDir, '.terraform', 'modules', 'modules.json'), 'utf8'),
    ) as ModuleManifest;
  } catch {
    return [];
  }
  const dirs = new Set<string>();
  for (const m of manifest.Modules ?? []) {
    if (!m.Dir || m.Dir.startsWith('.terraform')) continue;
    const abs = path.resolve(configDir, m.Dir);
    const rel = path.relative(configDir, abs);
    if (rel.startsWith('..')) dirs.add(abs);
  }
  return [...dirs];
}

function commonAncestor(dirs: string[]): string {
  let common = dirs[0];
  for (const d of dirs.slice(1)) {
    while (path.relative(common, d).startsWith('..')) common = path.dirname(common);
  }
  return common;
}

/**
 * kl's private terraform directory: the user's configuration copied (local
 * modules outside it keep their relative place), the root module's files
 * replaced by the ones kl prepared, a local backend whose state is the
 * slice. Providers come from the user's `.terraform/providers` (what their
 * own `terraform init` installed) when there is one, else from terraform's
 * usual sources (CLI configuration, TF_PLUGIN_CACHE_DIR).
 *
 * When the user's directory is initialised, kl reuses that instead of
 * running `terraform init` (a process, and with a real provider a hash of
 * its whole binary): their lock file is already copied, their modules'
 * manifest too, and their installed providers are linked. Terraform itself
 * checks all of it at plan (the lock file against the configuration, each
 * provider against the lock file's checksums, the manifest against every
 * module call), so a plan that succeeds is the plan a fresh init would give;
 * a plan that fails is run again after a fresh `terraform init`.
 */
export class TempWorkspaces implements TerraformWorkspaces {
  /** `warn` hears of a directory kl could not remove (by default, a `kl: warning:` line). */
  constructor(private readonly warn: (message: string) => void = warnOnStderr) {}

  async open(
    configDir: string,
    contents: WorkspaceContents | Promise<WorkspaceContents>,
  ): Promise<TerraformWorkspace> {
    // Settled here at once: a failure while the tree is being copied is not left unhandled.
    const ready = Promise.resolve(contents).then(
      (spec) => ({ spec }),
      (error: unknown) => ({ error }),
    );
    // Direct calls up to the pipes' process (microseconds each): with the contents on their way
    // the main thread is busy, and each asynchronous turn would put off terraform's start.
    const base = fsSync.mkdtempSync(path.join(os.tmpdir(), 'kl-apply-'));
    configDir = path.resolve(configDir);
    const initialised = fsSync.existsSync(path.join(configDir, '.terraform'));
    // A state still on its way goes through a pipe, so terraform plan can start meanwhile;
    // only when no terraform init has to run first (init gets the state as a file). With the
    // contents themselves on their way (kl plan still reading the configuration), the root
    // module's .tf files are pipes too, so terraform can start before they are parsed. Making
    // the pipes is a process of its own: started at once, beside the copy, and the pipes moved
    // into place once the tree is there.
    const pending = contents instanceof Promise;
    const laying: Promise<LaidPipes | null> =
      initialised && (pending || contents.state instanceof Promise)
        ? layPipes(base, pending ? pipedRootNames(configDir) : [])
        : Promise.resolve(null);
    laying.catch(() => undefined); // awaited below
    try {
      const outside = outsideModuleDirs(configDir);
      const top = outside.length > 0 ? commonAncestor([configDir, ...outside]) : configDir;
      const dir = path.join(base, 'tree', path.relative(top, configDir));
      const userModules = path.join(configDir, '.terraform', 'modules');
      copyTree(configDir, dir, true);
      for (const m of outside) copyTree(m, path.join(base, 'tree', path.relative(top, m)), false);
      if (fsSync.existsSync(userModules)) {
        copyDir(userModules, path.join(dir, '.terraform', 'modules'));
      }
      const laid = await laying;
      if (laid !== null && laid.roots.size > 0) {
        // Terraform may start now: it waits on the pipes for what kl is still preparing.
        for (const name of laid.roots.keys()) {
          fsSync.renameSync(path.join(base, ROOT_PIPE + name), path.join(dir, name));
        }
        const pluginDir = this.linkProviders(configDir, dir);
        fsSync.renameSync(path.join(base, STATE_PIPE), path.join(dir, STATE_FILE));
        const spec = ready.then((r) => {
          if ('error' in r) throw r.error;
          return r.spec;
        });
        const state = spec.then(async (s) => stringifyJson(await s.state, 2) + '\n');
        state.catch(() => undefined); // plan()'s to await
        const roots = spec.then((s) => placeRootFiles(base, dir, laid.roots, s));
        roots.catch(() => undefined); // plan()'s to await
        return new TempWorkspace(base, dir, pluginDir, true, this.warn, {
          pipe: laid.state,
          state,
          roots: { pipes: laid.roots, texts: roots },
          show: laid.show,
        });
      }
      // The state came with the contents: a file (the pipe goes with the directory).
      const settled = await ready;
      const pipe =
        laid !== null && 'spec' in settled && settled.spec.state instanceof Promise
          ? laid.state
          : null;
      if (pipe === null) closeAll(laid);
      if ('error' in settled) throw settled.error;
      const { spec } = settled;
      const stateText = Promise.resolve(spec.state).then((s) => stringifyJson(s, 2) + '\n');
      stateText.catch(() => undefined); // awaited below, or by plan() through the pipe
      // From here to terraform's start, a few small files and links: written with direct
      // calls, each a few microseconds, where an asynchronous one waited its turn on the
      // thread pool and then on the main thread (busy with the scope's exchange).
      for (const f of [...spec.rootFiles, ...pinnedVariables(spec)]) {
        fsSync.writeFileSync(path.join(dir, f.name), f.text);
      }
      const pluginDir = this.linkProviders(configDir, dir, initialised);
      if (pipe === null) await fs.writeFile(path.join(dir, STATE_FILE), await stateText);
      else fsSync.renameSync(path.join(base, STATE_PIPE), path.join(dir, STATE_FILE));
      const early =
        pipe === null ? null : { pipe, state: stateText, roots: null, show: laid!.show };
      return new TempWorkspace(base, dir, pluginDir, initialised, this.warn, early);
    } catch (e) {
      await laying.then(closeAll).catch(() => undefined);
      removeDirectory(base, this.warn); // its failure is warned of: e is what the user sees
      throw e;
    }
  }

  /**
   * The user's installed providers, linked into kl's directory when their
   * initialisation is reused; the directory a fresh init installs from.
   */
  private linkProviders(configDir: string, dir: string, reused = true): string | null {
    const providers = path.join(configDir, '.terraform', 'providers');
    const linked = fsSync.existsSync(providers);
    if (reused && linked) {
      fsSync.mkdirSync(path.join(dir, '.terraform'), { recursive: true });
      fsSync.symlinkSync(providers, path.join(dir, '.terraform', 'providers'), 'dir');
    }
    return !process.env.TF_PLUGIN_CACHE_DIR && linked ? providers : null;
  }
}

function warnOnStderr(message: string): void {
  process.stderr.write(`kl: warning: ${message}\n`);
}

/**
 * Removes kl's directory; a failure is warned of, never thrown: it would
 * replace the answer the user should see (a refusal, or a plan or apply
 * that went through), and the directory, which holds the state, is named so
 * it can be removed by hand. No retry: by the time this runs nothing kl
 * started writes into it any more (see TempWorkspace.dispose), and Node's
 * retry would not help anyway, as it tries the last `rmdir` again but never
 * the entries that landed meanwhile.
 */
function removeDirectory(dir: string, warn: (message: string) => void): void {
  try {
    // Direct calls: kl's directory is small, and removed while kl is finishing its answer,
    // when the asynchronous walk (a thread-pool turn per entry and level, each waiting for
    // the busy main thread) took longer than that answer and held up kl's exit.
    fsSync.rmSync(dir, { recursive: true, force: true });
  } catch (e) {
    const why = (e as NodeJS.ErrnoException).code ?? (e as Error).message;
    warn(
      `could not remove kl's directory ${dir} (${why}); it holds a copy of the state: remove it`,
    );
  }
}

interface LaidPipes {
  state: StatePipe;
  /** The root module's `.tf` files by name. */
  roots: Map<string, StatePipe>;
  /** The CLI configuration of a terraform show started beside the plan, and what to hand it. */
  show: HeldShowPipe | null;
}

type HeldShowPipe = { pipe: CliConfigPipe; config: string };

/**
 * The state's pipe, the root files' (by name) and the held show's
 * configuration's, made by one `mkfifo` in `base`; null where pipes cannot
 * be made or opened (then each is a file).
 */
async function layPipes(base: string, rootNames: string[]): Promise<LaidPipes | null> {
  const [state, show] = [path.join(base, STATE_PIPE), path.join(base, SHOW_CONFIG_PIPE)];
  const piped = [state, ...rootNames.map((n) => path.join(base, ROOT_PIPE + n))];
  const made = makeNamedPipes([...piped, show]);
  // The configuration a held terraform show is handed: read while mkfifo runs.
  const config = cliConfigText(terraformEnv());
  if (!(await made)) return null;
  const opened = piped.map((f) => StatePipe.open(f));
  const showPipe = config === null ? null : CliConfigPipe.open(show);
  if (opened.some((p) => p === null)) {
    for (const p of opened) p?.close();
    showPipe?.close();
    return null;
  }
  const [statePipe, ...rootPipes] = opened as StatePipe[];
  return {
    state: statePipe,
    roots: new Map(rootNames.map((n, i) => [n, rootPipes[i]])),
    show: showPipe && { pipe: showPipe, config: config! },
  };
}

function closeAll(laid: LaidPipes | null): void {
  laid?.state.close();
  for (const p of laid?.roots.values() ?? []) p.close();
  laid?.show?.pipe.close();
}

/**
 * The names of the root module's `.tf` files, each to be a pipe; none when
 * it has `.tf.json` files (kl may leave those out, and an empty one is not
 * valid JSON) or cannot be read (then it is read, and reported, as before).
 */
function pipedRootNames(configDir: string): string[] {
  try {
    const entries = fsSync.readdirSync(configDir, { withFileTypes: true });
    const names = entries.filter((e) => e.isFile()).map((e) => e.name);
    return names.some((n) => n.endsWith('.tf.json')) ? [] : names.filter((n) => n.endsWith('.tf'));
  } catch {
    return [];
  }
}

function pinnedVariables(spec: WorkspaceContents): ScopedFile[] {
  return spec.variables && Object.keys(spec.variables).length > 0
    ? [{ name: PINNED_VARIABLES, text: stringifyJson(spec.variables, 2) + '\n' }]
    : [];
}

/**
 * Puts the root files kl prepared in place of their pipes (a file the
 * scoped configuration leaves out is empty: terraform may already have
 * listed its name), the pinned variables before any: terraform reads
 * neither its variables nor past the first root file until then. Answers
 * each pipe's text, to hand over to a terraform already reading it.
 */
function placeRootFiles(
  base: string,
  dir: string,
  pipes: Map<string, StatePipe>,
  spec: WorkspaceContents,
): Map<string, string> {
  const unknown = spec.rootFiles.filter((f) => !pipes.has(f.name));
  if (unknown.length > 0) {
    throw new DomainError(
      CONFIG_INVALID,
      `${unknown.map((f) => f.name).join(', ')} appeared in the configuration while kl read it: plan again`,
    );
  }
  for (const f of pinnedVariables(spec)) fsSync.writeFileSync(path.join(dir, f.name), f.text);
  const texts = new Map([...pipes.keys()].map((name) => [name, '']));
  for (const f of spec.rootFiles) texts.set(f.name, f.text);
  const next = path.join(base, 'root.next');
  for (const [name, text] of texts) {
    fsSync.writeFileSync(next, text);
    fsSync.renameSync(next, path.join(dir, name));
  }
  return texts;
}

/** Copies a directory; at the root module, its configuration files and local state stay behind. */
function copyTree(from: string, to: string, rootModule: boolean): void {
  copyDir(from, to, (name, depth) => {
    if (SKIPPED.has(name)) return false;
    if (depth > 0 || !rootModule) return true;
    if (name.endsWith('.tf') || name.endsWith('.tf.json')) return false;
    return !name.startsWith('terraform.tfstate') && !name.endsWith('.tfplan');
  });
}

/**
 * Copies files (with their modes) and symbolic links (as they are) under
 * `from` whose names `keep` accepts. A configuration is a few small files:
 * direct calls copy a dozen in about a millisecond, where `fs.cp`'s walk
 * (a check of every destination and its parents) took 5–25 ms and an
 * asynchronous copy, side by side, waited a thread-pool turn and then a
 * turn of kl's busy main thread for each entry and level: ~10 ms on the
 * way to terraform's start. Anything else (a socket, a named pipe) is not
 * configuration and is left.
 */
function copyDir(
  from: string,
  to: string,
  keep: (name: string, depth: number) => boolean = () => true,
  depth = 0,
): void {
  const entries = fsSync.readdirSync(from, { withFileTypes: true });
  fsSync.mkdirSync(to, { recursive: true });
  for (const e of entries.filter((e) => keep(e.name, depth))) {
    const [src, dest] = [path.join(from, e.name), path.join(to, e.name)];
    if (e.isDirectory()) copyDir(src, dest, keep, depth + 1);
    else if (e.isSymbolicLink()) fsSync.symlinkSync(fsSync.readlinkSync(src), dest);
    else if (e.isFile()) fsSync.copyFileSync(src, dest);
  }
}

/** What `terraform plan` may start without: the state, and the root files, still on their way. */
interface EarlyContents {
  pipe: StatePipe;
  state: Promise<string>;
  /** The root module's pipes by name, and each one's text once kl has placed the files. */
  roots: { pipes: Map<string, StatePipe>; texts: Promise<Map<string, string>> } | null;
  /** A terraform show's CLI configuration, when it can be started beside the plan (held). */
  show: HeldShowPipe | null;
}

class TempWorkspace implements TerraformWorkspace {
  /** init() found the user's initialisation reusable: the next plan tries it first. */
  private reusing = false;
  initialisations = 0;
  /**
   * What the workspace started that may still write into its directory:
   * terraform's runs and kl's own asynchronous writes. dispose() waits for
   * them all before it removes the directory.
   */
  private readonly busy = new Set<Promise<unknown>>();

  constructor(
    private readonly base: string,
    readonly dir: string,
    private readonly pluginDir: string | null,
    private readonly reusable: boolean,
    private readonly warn: (message: string) => void,
    /** What is still on its way, and the pipes terraform plan reads it from. */
    private early: EarlyContents | null,
  ) {
    // The root files kl reads itself (the modules' locals) are there once placed.
    this.placed = early?.roots?.texts.then(
      () => undefined,
      () => undefined,
    );
  }

  private readonly placed: Promise<void> | undefined;

  /** `work`, counted as busy in the directory until it settles. */
  private tracked<T>(work: Promise<T>): Promise<T> {
    this.busy.add(work);
    const done = () => this.busy.delete(work);
    work.then(done, done);
    return work;
  }

  /** A terraform run in the directory, waited for by dispose(). */
  private terraform(args: string[], options: Omit<TerraformRunOptions, 'cwd'>) {
    return this.tracked(runTerraform(args, { cwd: this.dir, ...options }));
  }

  private async run(
    command: string,
    args: string[],
    signal?: AbortSignal,
    onLine?: (line: string) => void,
  ): Promise<TerraformRun> {
    return this.check(command, await this.terraform([command, ...args], { signal, onLine }));
  }

  /**
   * `terraform plan` started before its state (and maybe its root files) is
   * there: terraform reads them from the pipes when kl writes them. If they
   * fail to arrive, or the signal aborts before they have, terraform has
   * nothing to stop gracefully and is killed. Afterwards the state's pipe is
   * replaced by the state as a file, for whatever runs next in the
   * directory (a plan again, an apply).
   *
   * Once terraform is killed nothing more is written into the directory: a
   * refused plan answers at once and its caller removes the directory, so a
   * state arriving after the refusal is dropped. (Its copy, written then,
   * landed in the directory while it was being removed: ENOTEMPTY in place
   * of the refusal.)
   */
  private async planFed(
    early: EarlyContents,
    args: string[],
    signal?: AbortSignal,
  ): Promise<TerraformRun> {
    const [file, next] = [path.join(this.dir, STATE_FILE), path.join(this.base, 'state.next')];
    const kill = new AbortController();
    const state: { fed: boolean; failed?: { error: unknown } } = { fed: false };
    let exited = false;
    const onAbort = () => {
      if (!state.fed) kill.abort();
    };
    const fail = (error: unknown) => {
      state.failed ??= { error };
      kill.abort();
      return null;
    };
    const closeAll = () => {
      early.pipe.close();
      for (const p of early.roots?.pipes.values() ?? []) p.close();
    };
    if (signal?.aborted) onAbort();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const running = this.terraform(['plan', ...args], { signal, kill: kill.signal }).finally(
        () => (exited = true),
      );
      const roots = early.roots;
      const handing = roots?.texts.then(
        (texts) =>
          Promise.all(
            [...roots.pipes].map(([name, p]) => p.handOver(texts.get(name) ?? '', () => exited)),
          ),
        fail,
      );
      const feeding = early.state.then(async (text) => {
        if (kill.signal.aborted) return null;
        state.fed = true;
        // The file that replaces the pipe is written meanwhile, off the way to terraform show.
        const written = fs.writeFile(next, text);
        await Promise.all([early.pipe.feed(text, () => exited), this.tracked(written)]);
        return text;
      }, fail);
      // A refusal below returns before these settle (the state may never come): not unhandled.
      feeding.catch(() => undefined);
      handing?.catch(() => undefined);
      const run = await running;
      closeAll();
      if (state.failed) throw state.failed.error;
      // Killed before its state came (the signal): interrupted; the state is not waited for.
      if (kill.signal.aborted) return this.check('plan', run);
      if ((await feeding) === null) {
        // The state failed to come, or the signal aborted while kl waited for it (terraform gone).
        const failed = state.failed as { error: unknown } | undefined;
        if (failed) throw failed.error;
        return this.check('plan', { ...run, interrupted: true });
      }
      await handing;
      fsSync.renameSync(next, file); // on the way to terraform show: no thread-pool turn
      return this.check('plan', run);
    } finally {
      closeAll();
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /**
   * `terraform show` started now, beside the plan, and held at its CLI
   * configuration (a pipe, see CliConfigPipe) until the plan file is there:
   * its start-up, most of its time, runs meanwhile. Reads nothing in the
   * directory before its release. `release()` answers its run, or null if it
   * could not be handed its configuration (then it is gone, and the caller
   * runs show the usual way); `stop()` ends one never released.
   */
  private heldShow(held: HeldShowPipe): {
    release(): Promise<TerraformRun | null>;
    stop(): Promise<void>;
  } {
    const kill = new AbortController();
    let exited = false;
    const running = this.terraform(['show', ...SHOW_ARGS], {
      kill: kill.signal,
      env: { TF_CLI_CONFIG_FILE: held.pipe.file },
      niceness: HELD_SHOW_NICENESS,
    }).finally(() => (exited = true));
    return {
      release: async () => {
        if (await held.pipe.release(held.config, () => exited)) return running;
        kill.abort();
        await running;
        return null;
      },
      stop: async () => {
        kill.abort(); // a no-op once it has exited
        held.pipe.close();
        await running;
      },
    };
  }

  private check(command: string, run: TerraformRun): TerraformRun {
    if (run.interrupted) {
      throw new DomainError('APPLY.INTERRUPTED', `terraform ${command} was interrupted`);
    }
    if (run.code !== 0) {
      throw new DomainError(
        TERRAFORM_FAILED,
        `terraform ${command} failed in kl's directory: ${lastError(run.output)}`,
        { output: run.output },
      );
    }
    return run;
  }

  async init(signal?: AbortSignal): Promise<void> {
    if (this.reusable) {
      this.reusing = true;
      return;
    }
    await this.freshInit(signal);
  }

  private async freshInit(signal?: AbortSignal): Promise<void> {
    this.reusing = false;
    this.initialisations++;
    // The linked providers are the user's: init must install into a directory of its own.
    await fs.rm(path.join(this.dir, '.terraform', 'providers'), { force: true });
    const args = ['-input=false', '-no-color'];
    if (this.pluginDir) args.push(`-plugin-dir=${this.pluginDir}`);
    await this.run('init', args, signal);
  }

  async plan(
    options: { targets: string[]; refresh: boolean },
    signal?: AbortSignal,
  ): Promise<unknown> {
    const args = ['-input=false', '-no-color', '-lock=false', `-out=${PLAN_FILE}`];
    if (!options.refresh) args.push('-refresh=false');
    for (const t of options.targets) args.push(`-target=${t}`);
    const early = this.early;
    this.early = null;
    let show: ReturnType<TempWorkspace['heldShow']> | null = null;
    let shown: TerraformRun;
    try {
      try {
        // planFed spawns terraform plan before its first await: the show is spawned after it.
        const planning = early ? this.planFed(early, args, signal) : this.run('plan', args, signal);
        show = early?.show ? this.heldShow(early.show) : null;
        await planning;
      } catch (e) {
        // Whatever terraform found wrong with the reused initialisation, a fresh init decides.
        if (!this.reusing || !(e instanceof DomainError) || e.code !== TERRAFORM_FAILED) throw e;
        await this.freshInit(signal);
        await this.run('plan', args, signal);
      }
      const released = await show?.release();
      shown = released ? this.check('show', released) : await this.run('show', SHOW_ARGS, signal);
    } finally {
      await show?.stop();
    }
    try {
      return JSON.parse(shown.stdout) as unknown;
    } catch {
      throw new DomainError(
        TERRAFORM_FAILED,
        'terraform show -json printed something that is not JSON',
      );
    }
  }

  async apply(signal?: AbortSignal, onOutput?: (line: string) => void): Promise<ApplyResult> {
    const run = await this.terraform(
      ['apply', '-input=false', '-no-color', '-lock=false', '-auto-approve', PLAN_FILE],
      { signal, onLine: onOutput },
    );
    if (run.code === 0 && !run.interrupted) return { ok: true, output: run.output };
    return {
      ok: false,
      interrupted: run.interrupted,
      command: 'terraform apply',
      code: run.code,
      output: run.output,
    };
  }

  async stateText(): Promise<string | null> {
    try {
      const text = await fs.readFile(path.join(this.dir, STATE_FILE), 'utf8');
      return text.trim() === '' ? null : text;
    } catch {
      return null;
    }
  }

  async moduleDirs(): Promise<Map<string, string>> {
    await this.placed;
    const dirs = new Map<string, string>([['', this.dir]]);
    try {
      const manifest = JSON.parse(
        await fs.readFile(path.join(this.dir, '.terraform', 'modules', 'modules.json'), 'utf8'),
      ) as ModuleManifest;
      for (const m of manifest.Modules ?? []) {
        if (typeof m.Key === 'string' && typeof m.Dir === 'string') {
          dirs.set(m.Key, path.resolve(this.dir, m.Dir));
        }
      }
    } catch {
      // no modules
    }
    return dirs;
  }

  async dispose(): Promise<void> {
    // Pipes no plan has read (it was never started): kl's ends are closed with the directory.
    this.early?.pipe.close();
    for (const p of this.early?.roots?.pipes.values() ?? []) p.close();
    this.early?.show?.pipe.close();
    // What the workspace started ends first: an entry written while the directory is walked
    // leaves it not empty, and a terraform still running would lose its files. Whatever
    // settles may have started more (a run's end lets the next step begin).
    while (this.busy.size > 0) await Promise.allSettled([...this.busy]);
    removeDirectory(this.base, this.warn);
  }
}
