import { ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';

/**
 * Shared by the AWS-against-moto e2e tests and the refresh bench: finding
 * the tools and the Terraform filesystem mirror (never a hard-coded machine
 * path), starting and stopping moto on a free loopback port, and telling
 * which provider processes a test left behind.
 */

/** The absolute path of `tool` on PATH; throws naming what the caller needs. */
export function onPath(tool: string, why = 'terraform 1.11, moto_server and the aws CLI'): string {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, tool);
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return candidate;
    } catch {
      // keep looking
    }
  }
  throw new Error(`\`${tool}\` is not on PATH (needed: ${why})`);
}

/**
 * KL_TF_MIRROR, else a Terraform filesystem mirror holding hashicorp/aws:
 * the per-user plugin directories first, then every directory one or two
 * levels below the root.
 */
export function findTerraformMirror(): string {
  const holdsAws = (dir: string): boolean =>
    fs.existsSync(path.join(dir, 'registry.terraform.io', 'hashicorp', 'aws'));
  const given = process.env.KL_TF_MIRROR;
  if (given) {
    if (!holdsAws(given)) {
      throw new Error(`KL_TF_MIRROR=${given} holds no registry.terraform.io/hashicorp/aws`);
    }
    return given;
  }
  const skip = new Set(['/proc', '/sys', '/dev', '/run', '/tmp']);
  const candidates = [
    path.join(os.homedir(), '.terraform.d', 'plugins'),
    path.join(os.homedir(), '.local', 'share', 'terraform', 'plugins'),
  ];
  const children = (dir: string): string[] => {
    try {
      return fs
        .readdirSync(dir, { withFileTypes: true })
        .filter((d) => d.isDirectory() && d.name !== 'node_modules')
        .map((d) => path.join(dir, d.name))
        .filter((p) => !skip.has(p));
    } catch {
      return [];
    }
  };
  for (const top of children('/')) candidates.push(top, ...children(top));
  const found = candidates.find(holdsAws);
  if (!found) {
    throw new Error(
      'no Terraform filesystem mirror with hashicorp/aws found; set KL_TF_MIRROR to its directory',
    );
  }
  return found;
}

/** The single hashicorp/aws version in the mirror (the highest when there are several). */
export function awsVersionIn(mirror: string): string {
  const dir = path.join(mirror, 'registry.terraform.io', 'hashicorp', 'aws');
  const versions = fs
    .readdirSync(dir)
    .filter((v) => /^\d+\.\d+\.\d+$/.test(v))
    .sort((a, b) => {
      const [x, y] = [a, b].map((v) => v.split('.').map(Number));
      return x[0] - y[0] || x[1] - y[1] || x[2] - y[2];
    });
  if (versions.length === 0) throw new Error(`${dir} holds no provider version`);
  return versions[versions.length - 1];
}

/** A CLI config that installs providers from `mirror` only: nothing goes to the network. */
export function writeMirrorCliConfig(file: string, mirror: string): void {
  fs.writeFileSync(
    file,
    `provider_installation {\n  filesystem_mirror {\n    path = ${JSON.stringify(mirror)}\n  }\n}\n` +
      'disable_checkpoint = true\n',
  );
}

export function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

function httpStatus(url: string): Promise<number> {
  return new Promise((resolve) => {
    const req = http.get(url, { agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', () => resolve(0));
    req.setTimeout(1000, () => req.destroy());
  });
}

export interface Moto {
  /** http://127.0.0.1:<port> */
  endpoint: string;
  pid: number;
  child: ChildProcess;
  /** SIGTERM, then SIGKILL after 5 s; idempotent. */
  stop(): Promise<void>;
}

/** `moto_server` on a free loopback port, ready when /moto-api/ answers 200. */
export async function startMoto(readyTimeoutMs = 60_000): Promise<Moto> {
  const bin = onPath('moto_server');
  const port = await freeLoopbackPort();
  const endpoint = `http://127.0.0.1:${port}`;
  const child = spawn(bin, ['-H', '127.0.0.1', '-p', String(port)], { stdio: 'ignore' });
  let exited = false;
  const exit = new Promise<void>((resolve) =>
    child.once('exit', () => {
      exited = true;
      resolve();
    }),
  );
  const stop = async (): Promise<void> => {
    if (exited || child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([exit, new Promise((r) => (timer = setTimeout(r, 5000)))]);
    clearTimeout(timer);
    if (!exited) {
      child.kill('SIGKILL');
      await exit;
    }
  };
  const deadline = Date.now() + readyTimeoutMs;
  while ((await httpStatus(`${endpoint}/moto-api/`)) !== 200) {
    if (exited) throw new Error(`moto_server exited (${child.exitCode}) before answering`);
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`moto_server did not answer on ${endpoint} within ${readyTimeoutMs} ms`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return { endpoint, pid: child.pid!, child, stop };
}

/**
 * What points terraform's AWS provider at moto: the SDK's AWS_ENDPOINT_URL,
 * for every service, rather than an `endpoints` block in the HCL. With such a
 * block provider 5.100 spends about 5 s of CPU validating it
 * (PrepareProviderConfig: TF_LOG=trace shows the gap) in each of the 2–3
 * provider processes every terraform command starts; without one it takes
 * 0.3 s. Only terraform gets this: `kl` and kld are tested with the endpoints
 * in their stored provider config.
 */
export function motoEndpointEnv(moto: Pick<Moto, 'endpoint'>): Record<string, string> {
  return { AWS_ENDPOINT_URL: moto.endpoint };
}

/** The aws CLI against moto, with moto's dummy credentials. */
export function awsCliEnv(): NodeJS.ProcessEnv {
  return {
    AWS_ACCESS_KEY_ID: 'test',
    AWS_SECRET_ACCESS_KEY: 'test',
    AWS_DEFAULT_REGION: 'us-east-1',
    AWS_EC2_METADATA_DISABLED: 'true',
  };
}

/** True for a live process; a zombie (this container's PID 1 does not reap) is not. */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/^\d+ \(.*\) Z/.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/**
 * Live processes whose command line names `binaryName` and whose working
 * directory or command line lies under `root`: the providers this test or
 * bench started (terraform and kl run them from its own working directory),
 * not those of anyone else on the machine.
 */
export function processesUnder(root: string, binaryName: string): number[] {
  const pids: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === process.pid) continue;
    try {
      const cmdline = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').replace(/\0/g, ' ');
      if (!cmdline.includes(binaryName) || !pidAlive(pid)) continue;
      let cwd = '';
      try {
        cwd = fs.readlinkSync(`/proc/${entry}/cwd`);
      } catch {
        // no access: decide on the command line alone
      }
      if (cwd.startsWith(root) || cmdline.includes(root)) pids.push(pid);
    } catch {
      // exited while we looked
    }
  }
  return pids;
}
