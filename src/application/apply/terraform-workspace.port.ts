import { HclFile, ScopedFile } from '../../domain/apply/config-scope';
import type { JsonValue, StateDocumentV4 } from '../../domain/terraform';

export const TERRAFORM_WORKSPACES = Symbol('TerraformWorkspaces');
export const CONFIG_READER = Symbol('ConfigReader');

/** A module's configuration as read from its directory. */
export interface ModuleSource {
  /** `.tf` files, parsed. */
  hcl: HclFile[];
  /** `.tf.json` files: name → text. */
  json: Map<string, string>;
}

export interface ConfigReader {
  /** Raises PLAN.CONFIG_INVALID naming the file and line when a `.tf` file cannot be parsed. */
  readModule(dir: string): Promise<ModuleSource>;
}

/** What kl writes into its private directory over the copied configuration. */
export interface WorkspaceContents {
  /** The root module's `.tf`/`.tf.json` files as terraform must see them; no other root configuration file is copied. */
  rootFiles: ScopedFile[];
  /**
   * Written as the local backend's `terraform.tfstate`. Still a promise
   * when the caller is reading it: `terraform plan` may then start before
   * it arrives and read it when it does (a failure of it is plan's error).
   */
  state: StateDocumentV4 | Promise<StateDocumentV4>;
  /** Root input variables to pin (a `*.auto.tfvars.json` that wins over the user's). */
  variables?: Record<string, JsonValue>;
}

/** How kl's private directory is laid out. */
export interface WorkspaceSpec extends WorkspaceContents {
  /** The user's configuration directory (copied, minus its `.terraform` and state files). */
  configDir: string;
}

export interface TerraformFailure {
  /** The command that failed, e.g. `terraform plan`. */
  command: string;
  /** Exit code, null when terraform died of a signal. */
  code: number | null;
  /** Terraform's combined output, colour codes removed. */
  output: string;
}

export type ApplyResult =
  { ok: true; output: string } | ({ ok: false; interrupted: boolean } & TerraformFailure);

/**
 * A private directory with a local backend where terraform plans and
 * applies on kl's behalf (ADR 0007 addendum). Every command takes an abort
 * signal: terraform gets SIGINT and is waited for, so it can stop
 * gracefully and write the state it reached.
 */
export interface TerraformWorkspace {
  readonly dir: string;
  /**
   * Readies the directory for terraform: `terraform init`, or the user's own
   * initialisation reused when it is there (the next plan() then falls back
   * to a fresh init if terraform finds it does not fit).
   */
  init(signal?: AbortSignal): Promise<void>;
  /**
   * `terraform plan -out` then `terraform show -json` of that plan: the
   * parsed JSON. When the state was still on its way at open(), terraform
   * starts at once and is given the state when it arrives; if it fails
   * to arrive (or the signal aborts before it has), terraform is killed
   * and plan fails with that error.
   */
  plan(options: { targets: string[]; refresh: boolean }, signal?: AbortSignal): Promise<unknown>;
  /** Applies the saved plan of the last `plan()` call. */
  apply(signal?: AbortSignal, onOutput?: (line: string) => void): Promise<ApplyResult>;
  /** The local state as terraform left it; null when there is none. */
  stateText(): Promise<string | null>;
  /**
   * How many times `terraform init` has run in the directory so far (a
   * reused initialisation counts none): what was read from it before a later
   * init may be stale.
   */
  readonly initialisations: number;
  /** Module call key (`''`, `web`, `web.inner`) → its directory, as `terraform init` installed them. */
  moduleDirs(): Promise<Map<string, string>>;
  /**
   * Removes the directory once everything the workspace started in it has
   * ended. Never fails: a directory it cannot remove is warned of, so the
   * caller's own answer (a refusal, a committed apply) stays the answer.
   */
  dispose(): Promise<void>;
}

export interface TerraformWorkspaces {
  /**
   * Lays out a private directory for `configDir`. Copying the configuration
   * starts at once; the contents are written when they are there, so a
   * caller still reading the state can pass them as a promise. If they
   * fail, the directory is removed and open fails with their error. A
   * state that is itself a promise may be left to plan() (see there).
   */
  open(
    configDir: string,
    contents: WorkspaceContents | Promise<WorkspaceContents>,
  ): Promise<TerraformWorkspace>;
}

/** A terraform command failed; the message carries terraform's own last error lines. */
export const TERRAFORM_FAILED = 'TERRAFORM.FAILED';
