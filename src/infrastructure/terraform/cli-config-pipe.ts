import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

const { O_RDONLY, O_WRONLY, O_NONBLOCK } = fs.constants;
/** How often a release looks whether terraform has read its configuration. */
const POLL_MS = 1;
/** A configuration larger than this is not held (a pipe holds 64 KiB; these are a few lines). */
const MAX_TEXT_BYTES = 16 * 1024;

/**
 * The CLI configuration terraform would read in `env`, as the text of one
 * file, or null when it cannot be given as one: terraform reads
 * `TF_CLI_CONFIG_FILE` (or the older `TERRAFORM_CONFIG`) when set, a file
 * that does not exist or cannot be opened counting as none; otherwise
 * `~/.terraformrc` and every `*.tfrc`/`*.tfrc.json` of `~/.terraform.d`,
 * which it stops reading once the variable is set. So with such files, or
 * on Windows (`terraform.rc` under `%APPDATA%`), the answer is null. The
 * same holds for OpenTofu (KL_TERRAFORM may name it) unless it has files or
 * a variable of its own (`~/.tofurc`, its XDG directory,
 * `TOFU_CLI_CONFIG_FILE`): then null too, whichever binary runs.
 */
export function cliConfigText(env: NodeJS.ProcessEnv): string | null {
  if (process.platform === 'win32' || env.TOFU_CLI_CONFIG_FILE) return null;
  const override = env.TF_CLI_CONFIG_FILE || env.TERRAFORM_CONFIG;
  const home = env.HOME || os.homedir();
  if (!override) {
    let names: string[] = [];
    try {
      names = fs.readdirSync(path.join(home, '.terraform.d'));
    } catch {
      // no configuration directory: nothing more to read
    }
    if (names.some((n) => n.endsWith('.tfrc') || n.endsWith('.tfrc.json'))) return null;
    const xdg = env.XDG_CONFIG_HOME || path.join(home, '.config');
    for (const own of [path.join(home, '.tofurc'), path.join(xdg, 'opentofu')]) {
      if (fs.existsSync(own)) return null;
    }
  }
  const file = override || path.join(home, '.terraformrc');
  let stat: fs.Stats | undefined;
  try {
    stat = fs.statSync(file);
  } catch {
    return ''; // missing (or out of reach): terraform reads no file either
  }
  if (!stat.isFile() || stat.size > MAX_TEXT_BYTES) return null;
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return null; // unreadable: terraform would report it; let it, by not holding
  }
}

/**
 * A named pipe given to terraform as its CLI configuration file
 * (`TF_CLI_CONFIG_FILE`), so that a command can be started ahead of its
 * work and held there: terraform spends most of a short command (about 30
 * of the 37 ms of a `terraform show -json` here) on its own start-up, before
 * it reads that file, and reads the files it works on only after. kl writes
 * the configuration when the work is ready (`release`).
 *
 * Terraform opens the file twice (once to see that it exists, then to read
 * it to its end): kl holds a writer from the start, so neither open waits,
 * and closes it (terraform's end of file) only once terraform has read every
 * byte. Whether it has is seen by taking what is left in the pipe and
 * putting it back: a pipe found empty was read by terraform.
 */
export class CliConfigPipe {
  private constructor(
    readonly file: string,
    private reader: number | null,
    private writer: number | null,
  ) {}

  /** Opens kl's ends of the named pipe at `file` (already made); null if it cannot. */
  static open(file: string): CliConfigPipe | null {
    let reader: number | null = null;
    try {
      // Opening the write end needs a reader: kl's own, kept to look into the pipe.
      reader = fs.openSync(file, O_RDONLY | O_NONBLOCK);
      return new CliConfigPipe(file, reader, fs.openSync(file, O_WRONLY | O_NONBLOCK));
    } catch {
      if (reader !== null) fs.closeSync(reader);
      return null;
    }
  }

  /**
   * Writes `text` and resolves true once terraform has read all of it (the
   * pipe then ends); false, with the pipe closed, if terraform exits first
   * (`exited`) or has not read it within `limitMs`: the caller stops that
   * terraform and runs the command the usual way.
   */
  async release(text: string, exited: () => boolean, limitMs = 10_000): Promise<boolean> {
    const { reader, writer } = this;
    if (reader === null || writer === null) return false;
    // Never empty: an empty pipe is how kl sees that terraform has read it (a blank line is
    // an empty configuration, as no file is).
    const data = Buffer.from(text === '' ? '\n' : text);
    if (data.length > MAX_TEXT_BYTES) {
      this.close();
      return false;
    }
    const until = Date.now() + limitMs;
    const left = Buffer.alloc(MAX_TEXT_BYTES);
    try {
      fs.writeSync(writer, data);
      for (;;) {
        let taken = 0;
        try {
          taken = fs.readSync(reader, left);
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== 'EAGAIN') throw e;
        }
        // Empty: terraform has it all. The pipe's end is its end of file.
        if (taken === 0) return true;
        fs.writeSync(writer, left, 0, taken); // put back, in order: terraform has the rest
        if (exited() || Date.now() > until) return false;
        await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      }
    } catch {
      return false;
    } finally {
      this.close();
    }
  }

  /** Closes kl's ends: a terraform still waiting reads an empty configuration. */
  close(): void {
    for (const fd of [this.reader, this.writer]) if (fd !== null) fs.closeSync(fd);
    this.reader = null;
    this.writer = null;
  }
}
