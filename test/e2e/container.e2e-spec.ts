import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { DockerfileParser, Instruction } from 'dockerfile-ast';
import { validate } from 'dockerfile-utils';
import { parse as parseYaml } from 'yaml';
import { ROOT } from '../support/kld-process';
import { listenPort } from '../support/listen-port';
import { createTestDatabase, TestDatabase } from '../support/test-database';

const DOCKERFILE = fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
const ENTRYPOINT = path.join(ROOT, 'deploy', 'docker-entrypoint.sh');

/** The Dockerfile's last stage: what the image runs. */
function runtimeStage(): Instruction[] {
  const all = DockerfileParser.parse(DOCKERFILE).getInstructions();
  const lastFrom = all.map((i) => i.getKeyword()).lastIndexOf('FROM');
  return all.slice(lastFrom);
}
const args = (i: Instruction) => i.getArguments().map((a) => a.getValue());

/** The image's ENV, as `docker run` would set it. */
function imageEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const i of runtimeStage().filter((i) => i.getKeyword() === 'ENV')) {
    for (const p of (
      i as unknown as { getProperties(): { getName(): string; getValue(): string }[] }
    ).getProperties()) {
      env[p.getName()] = p.getValue();
    }
  }
  return env;
}

/**
 * No Docker engine runs here: the image's entrypoint runs as the image
 * would run it (same script, same arguments, the image's ENV), against a
 * test database; the Dockerfile is linted and checked for what the issue
 * requires.
 */
describe('the container image', () => {
  let t: TestDatabase;
  let dir: string;
  beforeAll(async () => {
    t = await createTestDatabase();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-container-'));
  });
  afterAll(async () => {
    fs.rmSync(dir, { recursive: true, force: true });
    await t.drop();
  });
  /**
   * Where gRPC listens: in a container the image's default (127.0.0.1:8081)
   * is the container's own; here it is the machine's, which another test
   * file's kld (or anything else) may hold at the same moment. These tests
   * never connect to it: any port the kernel gives.
   */
  const grpc = { KL_GRPC_LISTEN: '127.0.0.1:0' };
  /** A clean environment: PATH, HOME and the image's ENV, no KL_* of ours. */
  const env = (extra: Record<string, string>) => ({
    PATH: process.env.PATH ?? '',
    HOME: dir,
    ...imageEnv(),
    ...extra,
  });

  it('refuses to start without KL_DATABASE_URL, in one line, creating nothing', () => {
    const r = spawnSync(ENTRYPOINT, ['serve'], { cwd: dir, env: env({}), encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/^kld: KL_DATABASE_URL is required in the container \(/);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(fs.readdirSync(dir)).toEqual([]); // no embedded PostgreSQL data
    const empty = spawnSync(ENTRYPOINT, [], { cwd: dir, env: env({ KL_DATABASE_URL: '' }) });
    expect(empty.status).toBe(2);
  });

  it('serves with the image command, is healthy by its HEALTHCHECK, and stops on SIGTERM', async () => {
    const port = await listenPort();
    const e = env({ KL_DATABASE_URL: t.url, KL_LISTEN: `127.0.0.1:${port}`, ...grpc });
    const health = () =>
      spawnSync(ENTRYPOINT, ['healthcheck'], { cwd: dir, env: e, encoding: 'utf8' }).status;
    expect(health()).toBe(1); // nothing listens yet

    // CMD ["serve"] through ENTRYPOINT, as `docker run` does
    const cmd = runtimeStage().find((i) => i.getKeyword() === 'CMD')!;
    const command = JSON.parse(cmd.getArgumentsContent()!) as string[];
    const child = spawn(ENTRYPOINT, command, {
      cwd: dir,
      env: e,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    try {
      let healthy = false;
      for (let i = 0; i < 120 && !healthy && child.exitCode === null; i++) {
        await new Promise((r) => setTimeout(r, 250));
        healthy = health() === 0;
      }
      expect([healthy, out]).toEqual([true, expect.any(String)]);
      const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
      expect(ready.status).toBe(200);
    } finally {
      child.kill('SIGTERM');
    }
    // exec: the signal reached kld itself, which stopped cleanly
    expect(await exited).toBe(0);
    expect(health()).toBe(1);
    // JSON logs, from the image's KL_LOG_FORMAT
    expect(out.split('\n').find((l) => l.includes('kld listening'))).toMatch(
      /^\{.*"msg":"kld listening"/,
    );
  });

  it('with authentication on (the image listens on 0.0.0.0), starts once a token was created through the entrypoint', async () => {
    const port = await listenPort();
    const db = await createTestDatabase();
    // KL_AUTH=on stands for what 0.0.0.0 turns on: this test listens on loopback only.
    const e = env({
      KL_DATABASE_URL: db.url,
      KL_LISTEN: `127.0.0.1:${port}`,
      KL_AUTH: 'on',
      ...grpc,
    });
    const run = (args: string[]) =>
      spawnSync(ENTRYPOINT, args, { cwd: dir, env: e, encoding: 'utf8', timeout: 120_000 });
    try {
      const refused = run(['serve']);
      expect(refused.status).toBe(2);
      expect(refused.stderr).toContain('kld token create');
      // the bootstrap docs/operations.md gives: `docker compose run --rm kld-1 token create …`
      const created = run(['token', 'create', '--name', 'prometheus', '--scope', 'metrics']);
      expect([created.status, created.stdout]).toEqual([0, expect.stringMatching(/^kl_\S+\n$/)]);
      const child = spawn(ENTRYPOINT, ['serve'], { cwd: dir, env: e, stdio: 'ignore' });
      const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
      try {
        let healthy = false;
        for (let i = 0; i < 120 && !healthy && child.exitCode === null; i++) {
          await new Promise((r) => setTimeout(r, 250));
          healthy = run(['healthcheck']).status === 0; // /readyz needs no token
        }
        expect(healthy).toBe(true);
        const url = `http://127.0.0.1:${port}/metrics`;
        expect((await fetch(url)).status).toBe(401);
        const auth = { Authorization: `Bearer ${created.stdout.trim()}` };
        expect((await fetch(url, { headers: auth })).status).toBe(200);
      } finally {
        child.kill('SIGTERM');
      }
      expect(await exited).toBe(0);
    } finally {
      await db.drop();
    }
  });

  it('lints clean, and the linter finds a broken Dockerfile', () => {
    expect(validate(DOCKERFILE)).toEqual([]);
    const broken = DOCKERFILE.replace('EXPOSE 8080', 'EXPOSE eighty').replace(
      /^FROM .* AS build$/m,
      '',
    );
    expect(validate(broken).length).toBeGreaterThan(0);
  });

  it('is multi-stage, runs as a non-root user, with production dependencies and /readyz as its healthcheck', () => {
    const froms = DockerfileParser.parse(DOCKERFILE).getFROMs();
    expect(froms.length).toBeGreaterThanOrEqual(2);
    const stage = runtimeStage();
    const keyword = (k: string) => stage.filter((i) => i.getKeyword() === k);
    const user = keyword('USER').at(-1);
    expect(user && args(user)[0]).toMatch(/^(?!root$|0$)\w+/);
    expect(keyword('RUN').map((i) => i.getArgumentsContent())).toContainEqual(
      expect.stringMatching(/^npm ci --omit=dev\b/),
    );
    expect(keyword('HEALTHCHECK')[0]?.getArgumentsContent()).toContain(
      '"/app/deploy/docker-entrypoint.sh", "healthcheck"',
    );
    expect(JSON.parse(keyword('ENTRYPOINT')[0].getArgumentsContent()!)).toEqual([
      '/app/deploy/docker-entrypoint.sh',
    ]);
    // everything copied from the context exists, and the entrypoint lands where ENTRYPOINT runs it
    for (const copy of keyword('COPY')) {
      const flags = (copy as unknown as { getFlags(): { getName(): string }[] }).getFlags();
      if (flags.some((f) => f.getName() === 'from')) continue; // from the build stage
      for (const source of args(copy).slice(0, -1)) {
        expect([source, fs.existsSync(path.join(ROOT, source))]).toEqual([source, true]);
      }
    }
    expect(keyword('COPY').map(args)).toContainEqual([
      'deploy/docker-entrypoint.sh',
      './deploy/docker-entrypoint.sh',
    ]);
    expect(fs.statSync(ENTRYPOINT).mode & 0o111).toBe(0o111);
  });

  it('composes PostgreSQL and two kld replicas of the image on loopback ports', () => {
    const compose = parseYaml(fs.readFileSync(path.join(ROOT, 'deploy', 'compose.yaml'), 'utf8'), {
      merge: true,
    }) as {
      services: Record<
        string,
        { build?: { context: string }; environment?: Record<string, string>; ports?: string[] }
      >;
    };
    const klds = Object.entries(compose.services).filter(([, s]) => s.build);
    expect(klds).toHaveLength(2);
    const ports = klds.flatMap(([, s]) => s.ports ?? []);
    expect(new Set(ports).size).toBe(2);
    for (const p of ports) expect(p).toMatch(/^127\.0\.0\.1:\d+:8080$/);
    for (const [, s] of klds) {
      expect(path.resolve(ROOT, 'deploy', s.build!.context)).toBe(ROOT);
      expect(s.environment?.KL_DATABASE_URL).toMatch(/^postgres:\/\/.*@postgres:5432\//);
    }
    expect(compose.services.postgres).toBeDefined();
  });
});
