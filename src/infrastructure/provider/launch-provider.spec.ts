import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { launchProvider } from './grpc-provider-client';
import { MAGIC_COOKIE_VALUE } from './plugin-process';
import { ProviderError } from './provider-error';

let dir: string;

function script(name: string, body: string): string {
  const file = path.join(dir, name);
  fs.writeFileSync(file, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  return file;
}

async function failure(promise: Promise<unknown>): Promise<ProviderError> {
  try {
    await promise;
  } catch (e) {
    if (e instanceof ProviderError) return e;
    throw e;
  }
  throw new Error('expected the launch to fail');
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function restore(key: string, value: string | undefined): void {
  if (value === undefined) delete process.env[key];
  else process.env[key] = value;
}

let stale: string;
let foreign: string;

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-launch-'));
  // A socket dir left by a Node process that died hard, and one owned by a live process.
  const deadPid = spawnSync('true').pid!;
  stale = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-plugin-'));
  fs.writeFileSync(path.join(stale, 'owner.pid'), String(deadPid));
  fs.writeFileSync(path.join(stale, 'plugin123'), '');
  foreign = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-plugin-'));
  fs.writeFileSync(path.join(foreign, 'owner.pid'), String(process.ppid));
});
afterAll(() => {
  for (const d of [dir, stale, foreign]) fs.rmSync(d, { recursive: true, force: true });
});

describe('launching a provider plugin', () => {
  it('passes the go-plugin environment and reports a plugin that exits, with its stderr', async () => {
    const bin = script(
      'terraform-provider-exits',
      [
        'echo "cookie=$TF_PLUGIN_MAGIC_COOKIE" >&2',
        'echo "versions=$PLUGIN_PROTOCOL_VERSIONS" >&2',
        'echo "cert=$(echo "$PLUGIN_CLIENT_CERT" | head -n 1)" >&2',
        'test -d "$PLUGIN_UNIX_SOCKET_DIR" && echo "socket dir exists" >&2',
        'echo "This binary is a plugin. These are not meant to be executed directly." >&2',
        'exit 1',
      ].join('\n'),
    );
    const err = await failure(launchProvider(bin));
    expect(err.code).toBe('PROVIDER.START_FAILED');
    expect(err.message).toContain('exited before the handshake (code 1');
    expect(err.message).toContain(`cookie=${MAGIC_COOKIE_VALUE}`);
    expect(err.message).toContain('versions=5,6');
    expect(err.message).toContain('cert=-----BEGIN CERTIFICATE-----');
    expect(err.message).toContain('socket dir exists');
    expect(err.message).toContain('This binary is a plugin');
    expect(fs.existsSync(err.metadata.socketDir as string)).toBe(false);
  });

  it('keeps kld and kl settings (database URL, token) out of the plugin environment', async () => {
    const saved = { db: process.env.KL_DATABASE_URL, token: process.env.KL_TOKEN };
    process.env.KL_DATABASE_URL = 'postgres://kilolock:s3cret@127.0.0.1:1/kl';
    process.env.KL_TOKEN = 'kl_secretsecret';
    process.env.AWS_REGION_FOR_TEST = 'eu-west-3';
    try {
      const bin = script(
        'terraform-provider-env',
        ['env | grep -E "^(KL_|AWS_REGION_FOR_TEST)" | sed "s/^/seen /" >&2', 'exit 1'].join('\n'),
      );
      const err = await failure(launchProvider(bin));
      expect(err.message).toContain('seen AWS_REGION_FOR_TEST=eu-west-3');
      expect(err.message).not.toContain('seen KL_');
      expect(err.message).not.toContain('s3cret');
    } finally {
      restore('KL_DATABASE_URL', saved.db);
      restore('KL_TOKEN', saved.token);
      delete process.env.AWS_REGION_FOR_TEST;
    }
  });

  it('kills a plugin that never prints its handshake', async () => {
    const bin = script('terraform-provider-silent', 'echo "warming up" >&2\nexec sleep 60');
    const err = await failure(launchProvider(bin, { handshakeTimeoutMs: 500 }));
    expect(err.code).toBe('PROVIDER.START_FAILED');
    expect(err.message).toContain('no handshake line within 500 ms');
    expect(err.message).toContain('warming up');
    expect(alive(err.metadata.pid as number)).toBe(false);
    expect(fs.existsSync(err.metadata.socketDir as string)).toBe(false);
  });

  it('reports why a plugin did not start even when its socket dir cannot be removed', async () => {
    const actual = fs.promises.rm;
    const rm = jest
      .spyOn(fs.promises, 'rm')
      .mockImplementation((target, options) =>
        path.basename(String(target)).startsWith('kl-plugin-')
          ? Promise.reject(Object.assign(new Error('ENOTEMPTY'), { code: 'ENOTEMPTY' }))
          : actual(target, options),
      );
    try {
      const bin = script('terraform-provider-stuck', 'exec sleep 60');
      const err = await failure(launchProvider(bin, { handshakeTimeoutMs: 300 }));
      expect(err.code).toBe('PROVIDER.START_FAILED');
      expect(err.message).toContain('no handshake line within 300 ms');
      expect(rm).toHaveBeenCalledWith(err.metadata.socketDir, expect.anything());
      fs.rmSync(err.metadata.socketDir as string, { recursive: true, force: true });
    } finally {
      rm.mockRestore();
    }
  });

  it('kills a plugin whose handshake is not go-plugin gRPC', async () => {
    const bin = script(
      'terraform-provider-netrpc',
      'echo "1|5|unix|/tmp/x|netrpc|"\nexec sleep 60',
    );
    const err = await failure(launchProvider(bin));
    expect(err.code).toBe('PROVIDER.START_FAILED');
    expect(err.message).toContain('only grpc is supported');
    expect(alive(err.metadata.pid as number)).toBe(false);
  });

  it('refuses a plugin protocol other than 5 or 6', async () => {
    const bin = script(
      'terraform-provider-v4',
      'echo "1|4|unix|$PLUGIN_UNIX_SOCKET_DIR/s|grpc|"\nexec sleep 60',
    );
    const err = await failure(launchProvider(bin));
    expect(err.code).toBe('PROVIDER.START_FAILED');
    expect(err.message).toContain('plugin protocol 4');
    expect(alive(err.metadata.pid as number)).toBe(false);
  });

  it('kills a plugin whose socket cannot be connected to', async () => {
    const bin = script(
      'terraform-provider-nosocket',
      'echo "1|5|unix|$PLUGIN_UNIX_SOCKET_DIR/missing|grpc|"\nexec sleep 60',
    );
    const err = await failure(launchProvider(bin, { connectTimeoutMs: 500 }));
    expect(err.code).toBe('PROVIDER.START_FAILED');
    expect(err.message).toContain('gRPC connection not ready');
    expect(alive(err.metadata.pid as number)).toBe(false);
    expect(fs.existsSync(err.metadata.socketDir as string)).toBe(false);
  });

  it('removes socket dirs whose owning process is gone, and only those', () => {
    // Any launch above swept them.
    expect(fs.existsSync(stale)).toBe(false);
    expect(fs.existsSync(foreign)).toBe(true);
  });

  it('refuses a file that is not executable', async () => {
    const file = path.join(dir, 'terraform-provider-plain');
    fs.writeFileSync(file, 'not a program', { mode: 0o644 });
    const err = await failure(launchProvider(file));
    expect(err.code).toBe('PROVIDER.START_FAILED');
    expect(err.message).toContain('is not executable');
  });
});
