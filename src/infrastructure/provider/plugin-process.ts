import { ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { clientCertificate, ClientCertificate } from './client-certificate';
import { Handshake, parseHandshakeLine } from './handshake';
import { PluginLogger, PluginStderr } from './plugin-stderr';
import { ProviderError } from './provider-error';

export const MAGIC_COOKIE_KEY = 'TF_PLUGIN_MAGIC_COOKIE';
export const MAGIC_COOKIE_VALUE =
  'd602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2';

export interface StartPluginOptions {
  /** Receives every stderr line of the plugin (hclog JSON parsed). */
  logger?: PluginLogger;
  handshakeTimeoutMs?: number;
  /** Extra environment for the plugin, on top of ours. */
  env?: Record<string, string>;
}

interface PluginProcess {
  readonly child: ChildProcess;
  readonly certificate: ClientCertificate;
  readonly socketDir: string;
  readonly stderr: PluginStderr;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  hasExited(): boolean;
  /** SIGKILLs if still running, waits for the exit, removes the socket dir. */
  kill(): Promise<void>;
}

/** A running plugin process that has completed the go-plugin handshake. */
export interface StartedPlugin extends PluginProcess {
  readonly handshake: Handshake;
}

const live = new Set<PluginProcess>();
let exitHookInstalled = false;

/** Plugins never outlive a Node process that exits normally or by uncaught error. */
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const p of live) {
      try {
        p.child.kill('SIGKILL');
      } catch {
        // already gone
      }
      fs.rmSync(p.socketDir, { recursive: true, force: true });
    }
  });
}

const SOCKET_DIR_PREFIX = 'kl-plugin-';
const OWNER_FILE = 'owner.pid';
let swept = false;

/**
 * Socket dirs of a Node process that died hard (SIGKILL, OOM) are never
 * removed by it; the next process removes those whose owner is gone.
 */
function sweepStaleSocketDirs(): void {
  if (swept) return;
  swept = true;
  let names: string[];
  try {
    names = fs.readdirSync(os.tmpdir()).filter((n) => n.startsWith(SOCKET_DIR_PREFIX));
  } catch {
    return;
  }
  for (const name of names) {
    const dir = path.join(os.tmpdir(), name);
    try {
      const owner = Number(fs.readFileSync(path.join(dir, OWNER_FILE), 'utf8'));
      if (Number.isInteger(owner) && owner > 0 && !processExists(owner)) {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    } catch {
      // no owner file yet (being created) or not ours to judge
    }
  }
}

function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

let setprivPath: string | null | undefined;

/** util-linux `setpriv --pdeathsig KILL` kills the plugin if Node dies by SIGKILL or OOM. */
function findSetpriv(): string | null {
  if (setprivPath !== undefined) return setprivPath;
  setprivPath = null;
  if (process.platform !== 'linux') return null;
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    const candidate = path.join(dir, 'setpriv');
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      setprivPath = candidate;
      break;
    } catch {
      // keep looking
    }
  }
  return setprivPath;
}

/**
 * The environment a provider inherits: ours minus every `KL_*` variable.
 * Those hold kld's database URL (with its password) and kl's token; a
 * provider never needs them, and a provider's debug log or crash report
 * would otherwise carry them away. Credentials a provider does read (AWS_*,
 * proxies) pass unchanged.
 */
export function providerEnv(from: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(from)) {
    if (!key.startsWith('KL_')) env[key] = value;
  }
  return env;
}

export async function startPlugin(
  binary: string,
  options: StartPluginOptions = {},
): Promise<StartedPlugin> {
  installExitHook();
  try {
    fs.accessSync(binary, fs.constants.X_OK);
  } catch (e) {
    throw new ProviderError(
      'PROVIDER.START_FAILED',
      `provider binary ${binary} is not executable`,
      { binary },
      { cause: e },
    );
  }
  const certificate = await clientCertificate();
  sweepStaleSocketDirs();
  const socketDir = fs.mkdtempSync(path.join(os.tmpdir(), SOCKET_DIR_PREFIX));
  fs.writeFileSync(path.join(socketDir, OWNER_FILE), String(process.pid));
  const env: NodeJS.ProcessEnv = {
    ...providerEnv(process.env),
    ...options.env,
    [MAGIC_COOKIE_KEY]: MAGIC_COOKIE_VALUE,
    PLUGIN_PROTOCOL_VERSIONS: '5,6',
    PLUGIN_CLIENT_CERT: certificate.certPem,
    PLUGIN_UNIX_SOCKET_DIR: socketDir,
  };
  delete env.PLUGIN_MULTIPLEX_GRPC;
  const setpriv = findSetpriv();
  const [command, args] = setpriv ? [setpriv, ['--pdeathsig', 'KILL', '--', binary]] : [binary, []];

  const stderr = new PluginStderr(options.logger);
  let child: ChildProcess;
  try {
    child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (e) {
    fs.rmSync(socketDir, { recursive: true, force: true });
    throw new ProviderError(
      'PROVIDER.START_FAILED',
      `could not spawn ${binary}`,
      { binary },
      { cause: e },
    );
  }
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (chunk: string) => stderr.write(chunk));
  child.stderr!.on('end', () => stderr.end());

  let exitedFlag = false;
  // 'close' comes after 'exit' once stdout and stderr are fully read.
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => {
      exitedFlag = true;
      resolve({ code, signal });
    });
    child.once('error', () => {
      exitedFlag = true;
      resolve({ code: null, signal: null });
    });
  });

  let killing: Promise<void> | null = null;
  const proc: PluginProcess = {
    child,
    certificate,
    socketDir,
    stderr,
    exited,
    hasExited: () => exitedFlag,
    kill: () => {
      killing ??= (async () => {
        if (!exitedFlag) child.kill('SIGKILL');
        await exited;
        await Promise.race([closed, delay(1000)]);
        live.delete(proc);
        await removeSocketDir(socketDir);
      })();
      return killing;
    },
  };
  live.add(proc);
  void exited.then(() => removeSocketDir(socketDir));

  let handshake: Handshake;
  try {
    const line = await firstLine(child, exited, options.handshakeTimeoutMs ?? 30_000);
    handshake = parseHandshakeLine(line);
  } catch (e) {
    await proc.kill();
    const tail = stderr.tailText();
    const reason = e instanceof Error ? e.message : String(e);
    throw new ProviderError(
      'PROVIDER.START_FAILED',
      `provider ${path.basename(binary)} did not start: ${reason}${tail ? `\n--- plugin stderr (tail) ---\n${tail}` : ''}`,
      { binary, pid: child.pid, socketDir, stderrTail: tail },
      { cause: e },
    );
  }
  // go-plugin may keep writing to stdout; it must be drained like stderr.
  child.stdout!.resume();
  return { ...proc, handshake };
}

/**
 * Removes a plugin's socket directory once the plugin is gone; never fails:
 * kill() is awaited on the way to the error the user should see (a plugin
 * that did not start, or crashed), which a failed removal must not replace.
 * A directory left is swept by the next process (sweepStaleSocketDirs).
 */
function removeSocketDir(dir: string): Promise<void> {
  return fs.promises.rm(dir, { recursive: true, force: true }).catch(() => undefined);
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

function firstLine(
  child: ChildProcess,
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>,
  timeoutMs: number,
): Promise<string> {
  return new Promise((resolve, reject) => {
    let buffered = '';
    let settled = false;
    const finish = (err: Error | null, line?: string): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      child.stdout!.off('data', onData);
      if (err) reject(err);
      else resolve(line!);
    };
    const onData = (chunk: Buffer): void => {
      buffered += chunk.toString();
      const nl = buffered.indexOf('\n');
      if (nl >= 0) finish(null, buffered.slice(0, nl));
      else if (buffered.length > 64 * 1024)
        finish(new Error('no handshake line in the first 64 KiB of stdout'));
    };
    const timer = setTimeout(
      () => finish(new Error(`no handshake line within ${timeoutMs} ms`)),
      timeoutMs,
    );
    child.stdout!.on('data', onData);
    child.once('error', (e) => finish(e));
    void exited.then(({ code, signal }) =>
      // Give a last stdout chunk that raced the exit a chance to arrive.
      setImmediate(() =>
        finish(new Error(`exited before the handshake (code ${code}, signal ${signal})`)),
      ),
    );
  });
}
