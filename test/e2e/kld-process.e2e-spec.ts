import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ChildRunner } from '../support/child-runner';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import {
  descendantsOf,
  isAlive,
  KL,
  KLD,
  listeningAt,
  processesMatching,
  ROOT,
  startKld,
} from '../support/kld-process';

describe('kld as a process', () => {
  // Async, not spawnSync, next to HTTP calls: a blocked event loop keeps
  // fetch from retiring pooled connections the server has already closed.
  const children = new ChildRunner(() => ({ cwd: ROOT, env: process.env }));
  afterAll(() => children.killAll());
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-kld-'));
    fs.chmodSync(dir, 0o711); // as root, the embedded server's postgres user must enter it
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));
  /**
   * A data directory the tests of one describe take in turn, each starting
   * kld on what the one before left stopped: only the first pays for
   * initdb, where what they test is not the first start.
   */
  function sharedDataDir(): () => string {
    let shared = '';
    beforeAll(() => {
      shared = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-kld-shared-'));
      fs.chmodSync(shared, 0o711);
    });
    afterAll(() => {
      if (shared) fs.rmSync(shared, { recursive: true, force: true });
    });
    return () => path.join(shared, 'data');
  }

  it('starts with embedded PostgreSQL, becomes ready, and stops on SIGTERM leaving no postgres', async () => {
    const dataDir = path.join(dir, 'data');
    const kld = await startKld({ KL_DATA_DIR: dataDir });
    expect(fs.existsSync(path.join(dataDir, 'pgdata', 'PG_VERSION'))).toBe(true);
    expect(processesMatching(path.join(dataDir, 'pgdata')).length).toBeGreaterThan(0);

    const health = await fetch(`${kld.url}/healthz`);
    expect(health.status).toBe(200);
    const ready = await (await fetch(`${kld.url}/readyz`)).json();
    expect(ready).toEqual({
      status: 'ready',
      checks: { database: true, migrations: true, projections: true, readModels: true },
    });
    // Logs are structured JSON lines with request ids.
    const requestLine = kld
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l))
      .find((l) => l.path === '/healthz');
    expect(requestLine).toMatchObject({ method: 'GET', status: 200 });
    expect(typeof requestLine.requestId).toBe('string');

    const { code, ms } = await kld.stop('SIGTERM');
    expect(code).toBe(0);
    expect(ms).toBeLessThan(10_000);
    expect(processesMatching(path.join(dataDir, 'pgdata'))).toEqual([]);

    // Restart on the same data directory keeps working (no re-init).
    const again = await startKld({ KL_DATA_DIR: dataDir });
    expect((await fetch(`${again.url}/readyz`)).status).toBe(200);
    expect((await again.stop('SIGINT')).code).toBe(0);
    expect(processesMatching(path.join(dataDir, 'pgdata'))).toEqual([]);
  });

  describe('`npm start`', () => {
    const npmDataDir = sharedDataDir();
    it.each<[string, (npm: number) => void]>([
      ['SIGTERM to the npm process (a supervisor)', (npm) => process.kill(npm, 'SIGTERM')],
      // The terminal signals the whole group, and npm forwards it once more.
      ['Ctrl-C (SIGINT to its process group)', (npm) => process.kill(-npm, 'SIGINT')],
    ])(
      '`npm start` stops kld and its PostgreSQL gracefully on %s, exiting 0',
      async (_how, signal) => {
        const dataDir = npmDataDir();
        // --ignore-scripts skips only `prestart` (the build; dist/ is built):
        // the same process tree as the README's `npm start`. Ports the kernel
        // picks as kld binds, read from its log: a port picked free beforehand
        // could be another worker's by the time kld, after initdb, bound it,
        // and the default gRPC port (8081) anyone's on this machine.
        const npm = spawn('npm', ['start', '--ignore-scripts'], {
          cwd: ROOT,
          env: {
            ...process.env,
            KL_DATA_DIR: dataDir,
            KL_LISTEN: '127.0.0.1:0',
            KL_GRPC_LISTEN: '127.0.0.1:0',
            KL_LOG_FORMAT: 'json',
          },
          stdio: ['ignore', 'pipe', 'pipe'],
          detached: true, // its own process group, as under a terminal
        });
        let out = '';
        npm.stdout!.on('data', (c: Buffer) => (out += c.toString()));
        npm.stderr!.on('data', (c: Buffer) => (out += c.toString()));
        const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
          npm.once('exit', (code, signal) => resolve({ code, signal })),
        );
        let tree: number[] = [];
        try {
          let url: string | undefined;
          for (let i = 0; i < 300; i++) {
            if (npm.exitCode !== null) throw new Error(`npm start exited during start:\n${out}`);
            url ??= listeningAt(out, undefined)?.url;
            if (url && (await fetch(`${url}/readyz`).catch(() => null))?.status === 200) break;
            await new Promise((r) => setTimeout(r, 100));
          }
          if (url === undefined) throw new Error(`npm start never said where it listens:\n${out}`);
          expect((await fetch(`${url}/readyz`)).status).toBe(200);
          tree = descendantsOf(npm.pid!);
          const postgres = processesMatching(path.join(dataDir, 'pgdata'));
          expect(postgres.length).toBeGreaterThan(0);
          expect(tree).toEqual(expect.arrayContaining(postgres));

          signal(npm.pid!);
          const timeout = new Promise((r) =>
            setTimeout(() => r('still running after 15 s'), 15_000),
          );
          expect(await Promise.race([exited, timeout])).toEqual({ code: 0, signal: null });
          for (let i = 0; i < 50 && tree.some(isAlive); i++) {
            await new Promise((r) => setTimeout(r, 100));
          }
          expect(tree.filter(isAlive)).toEqual([]);
          expect(processesMatching(path.join(dataDir, 'pgdata'))).toEqual([]);
          expect(out).toContain('"msg":"stopped"');
          expect(out).not.toContain('second signal');
        } finally {
          for (const pid of [npm.pid!, ...tree].filter(isAlive)) process.kill(pid, 'SIGKILL');
        }
      },
    );
  });

  it('runs PostgreSQL as a user that can enter the data directory, or says plainly why not', async () => {
    fs.chmodSync(dir, 0o700);
    const dataDir = path.join(dir, 'data');
    if (os.userInfo().uid !== 0) {
      // Not root: PostgreSQL runs as us, and a private parent folder is fine.
      const kld = await startKld({ KL_DATA_DIR: dataDir });
      expect((await kld.stop()).code).toBe(0);
      return;
    }
    // Root: PostgreSQL runs as OS user postgres, which cannot enter a 0700 folder of root's.
    const r = spawnSync(process.execPath, [KLD, 'serve'], {
      env: { ...process.env, KL_DATA_DIR: dataDir },
      encoding: 'utf8',
    });
    expect(r.status).toBe(1);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toContain(`cannot enter ${dir}`);
  });

  it('without KL_DATA_DIR, starts from a checkout in a private folder, and keeps its data where PostgreSQL can reach it', async () => {
    fs.chmodSync(dir, 0o700); // like /root, or a fresh mktemp -d
    const checkout = path.join(dir, 'kilolock');
    fs.mkdirSync(checkout);
    const local = path.join(checkout, '.kilolock');
    const start = () => startKld({ KL_DATA_DIR: undefined }, 60_000, { cwd: checkout });
    /** The data directory kld said it uses instead of the default. */
    const movedTo = (output: string): string | undefined =>
      output
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { dataDir?: string })
        .find((l) => l.dataDir)?.dataDir;

    if (os.userInfo().uid !== 0) {
      // Not root: PostgreSQL runs as us and the default is fine.
      const kld = await start();
      expect(fs.existsSync(path.join(local, 'pgdata', 'PG_VERSION'))).toBe(true);
      expect(movedTo(kld.output())).toBeUndefined();
      expect((await kld.stop()).code).toBe(0);
      return;
    }
    const sharedRoot = '/var/lib/kilolock';
    const hadRoot = fs.existsSync(sharedRoot);
    let moved: string | undefined;
    try {
      const kld = await start();
      moved = movedTo(kld.output());
      expect((await kld.stop()).code).toBe(0);
      expect(moved).toMatch(/^\/var\/lib\/kilolock\/[0-9a-f]{12}$/);
      expect(kld.output()).toContain(`cannot reach ${local}`);
      expect(fs.existsSync(path.join(moved!, 'pgdata', 'PG_VERSION'))).toBe(true);
      expect(fs.existsSync(local)).toBe(false);

      // The next start from the same checkout finds its data again.
      const again = await start();
      expect(movedTo(again.output())).toBe(moved);
      expect((await again.stop()).code).toBe(0);
    } finally {
      if (moved) fs.rmSync(moved, { recursive: true, force: true });
      if (!hadRoot) fs.rmSync(sharedRoot, { recursive: true, force: true });
    }
  });

  describe('with KL_DATABASE_URL', () => {
    let t: TestDatabase;
    beforeAll(async () => (t = await createTestDatabase()));
    afterAll(async () => t.drop());

    it('uses that database and starts no PostgreSQL of its own', async () => {
      const dataDir = path.join(dir, 'unused');
      const kld = await startKld({ KL_DATABASE_URL: t.url, KL_DATA_DIR: dataDir });
      try {
        expect((await fetch(`${kld.url}/readyz`)).status).toBe(200);
        expect(fs.existsSync(dataDir)).toBe(false);
        // writes side by side (each sends its hint), then idle, its projector
        // loops waiting: no Node warning reaches the operator's log
        const locks = Array.from({ length: 8 }, (_, i) =>
          fetch(`${kld.url}/v1/state-lock/quiet-${i}`, {
            method: 'POST',
            headers: { 'Content-Type': 'application/json' },
            body: JSON.stringify({ ID: `l${i}` }),
          }),
        );
        expect((await Promise.all(locks)).map((r) => r.status)).toEqual(Array(8).fill(200));
        await new Promise((r) => setTimeout(r, 500));
        expect(kld.output()).not.toMatch(/Warning:/);
      } finally {
        expect((await kld.stop()).code).toBe(0);
      }
    });

    it('rebuilds the read models from the log, by command and over REST, serving the same state', async () => {
      const kld = await startKld({ KL_DATABASE_URL: t.url });
      try {
        const doc = {
          version: 4,
          terraform_version: '1.11.4',
          serial: 3,
          lineage: 'rebuild-lineage',
          outputs: { n: { value: 1, type: 'number' } },
          resources: [],
          check_results: null,
        };
        const post = await fetch(`${kld.url}/v1/states/ops/rebuild`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify(doc),
        });
        expect(post.status).toBe(200);
        const before = await (await fetch(`${kld.url}/v1/states/ops/rebuild`)).text();

        // Next to a running server, the offline command refuses and names the way that works.
        const offline = () =>
          children.run(process.execPath, [KLD, 'projections', 'rebuild'], {
            env: { KL_DATABASE_URL: t.url, KL_LOG_LEVEL: 'error' },
          });
        const refused = await offline();
        expect(refused.code).toBe(2);
        expect(refused.stdout).toBe('');
        expect(refused.stderr).toBe(
          'kld: a kld server is running on this database; rebuild through it instead: ' +
            'kl projections rebuild (POST /v1/admin/projections/rebuild)\n',
        );

        const rest = await fetch(`${kld.url}/v1/admin/projections/rebuild`, { method: 'POST' });
        expect(rest.status).toBe(200);
        const body = (await rest.json()) as { projectors: { projector: string; events: number }[] };
        expect(body.projectors.length).toBeGreaterThanOrEqual(3);
        expect(body.projectors.every((p) => p.events > 0)).toBe(true);
        const viaKl = await children.run(process.execPath, [
          KL,
          '--server',
          kld.url,
          '--format',
          'json',
          'projections',
          'rebuild',
        ]);
        expect(viaKl.stderr).toBe('');
        expect(viaKl.code).toBe(0);
        expect(await (await fetch(`${kld.url}/v1/states/ops/rebuild`)).text()).toBe(before);

        expect((await kld.stop()).code).toBe(0);
        const r = await offline();
        expect(r.stderr).toBe('');
        expect(r.code).toBe(0);
        expect(r.stdout).toMatch(/^state-raw: \d+ events replayed$/m);
        const again = await startKld({ KL_DATABASE_URL: t.url });
        try {
          expect(await (await fetch(`${again.url}/v1/states/ops/rebuild`)).text()).toBe(before);
        } finally {
          await again.stop();
        }
      } finally {
        await kld.stop();
      }
    });

    it('answers unknown routes with a JSON error, not a stack trace, and does not name its framework', async () => {
      const kld = await startKld({ KL_DATABASE_URL: t.url });
      try {
        const r = await fetch(`${kld.url}/v1/nothing-here`);
        expect(r.status).toBe(404);
        expect(await r.json()).toEqual({
          error: { code: 'REQUEST.NOT_FOUND', message: expect.any(String) },
        });
        const ready = await fetch(`${kld.url}/readyz`);
        expect(ready.headers.get('x-powered-by')).toBeNull();
        expect(r.headers.get('x-powered-by')).toBeNull();
      } finally {
        await kld.stop();
      }
    });

    it('refuses to start when an applied migration was edited', async () => {
      await t.db.query(`UPDATE kl_migrations SET checksum = 'edited' WHERE id = 1`);
      try {
        const r = spawnSync(process.execPath, [KLD, 'migrate'], {
          env: { ...process.env, KL_DATABASE_URL: t.url },
          encoding: 'utf8',
        });
        expect(r.status).toBe(2);
        expect(r.stderr.trim().split('\n')).toHaveLength(1);
        expect(r.stderr).toMatch(
          /kld: migration 001_event_store\.sql was edited after it was applied/,
        );
      } finally {
        const { loadMigrations } = await import('../../src/infrastructure/postgres/migrator');
        await t.db.query(`UPDATE kl_migrations SET checksum = $1 WHERE id = 1`, [
          loadMigrations()[0].checksum,
        ]);
      }
    });
  });

  describe('offline rebuilds', () => {
    const offlineDataDir = sharedDataDir();
    it('refuses an offline rebuild next to a server on the same data directory', async () => {
      const dataDir = offlineDataDir();
      const kld = await startKld({ KL_DATA_DIR: dataDir });
      try {
        const r = await children.run(process.execPath, [KLD, 'projections', 'rebuild'], {
          env: { KL_DATA_DIR: dataDir, KL_LOG_LEVEL: 'error' },
        });
        expect(r.code).toBe(2);
        expect(r.stdout).toBe('');
        expect(r.stderr.trim().split('\n')).toHaveLength(1);
        expect(r.stderr).toMatch(
          /^kld: .*pgdata is in use by a running kld \(its PostgreSQL has pid \d+\); rebuild through it instead: kl projections rebuild/,
        );
        expect((await fetch(`${kld.url}/readyz`)).status).toBe(200);
      } finally {
        expect((await kld.stop()).code).toBe(0);
      }
    });

    it('rebuilds offline after a crash emptied the read models, so the next serve finds them whole', async () => {
      const dataDir = offlineDataDir();
      const kld = await startKld({ KL_DATA_DIR: dataDir });
      const doc = {
        version: 4,
        terraform_version: '1.11.4',
        serial: 1,
        lineage: 'crash-lineage',
        outputs: {},
        resources: [
          {
            mode: 'managed',
            type: 'terraform_data',
            name: 'a',
            provider: 'provider["terraform.io/builtin/terraform"]',
            instances: [{ schema_version: 0, attributes: { id: 'a', input: 'x' } }],
          },
        ],
        check_results: null,
      };
      let before: string;
      let postmaster = 0;
      try {
        const post = await fetch(`${kld.url}/v1/states/ops/crashed`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify(doc),
        });
        expect(post.status).toBe(200);
        before = await (await fetch(`${kld.url}/v1/states/ops/crashed`)).text();
        // Its PostgreSQL killed outright: the recovery at the next start empties the UNLOGGED read models.
        postmaster = Number(
          fs.readFileSync(path.join(dataDir, 'pgdata', 'postmaster.pid'), 'utf8').split('\n')[0],
        );
        process.kill(postmaster, 'SIGKILL');
        for (let i = 0; i < 100 && isAlive(postmaster); i++)
          await new Promise((r) => setTimeout(r, 50));
      } finally {
        await kld.stop('SIGKILL');
      }
      // Until its parent has reaped it, the killed postmaster's PID still
      // answers, and the next PostgreSQL start takes it for a live one.
      for (let i = 0; i < 200 && fs.existsSync(`/proc/${postmaster}`); i++)
        await new Promise((r) => setTimeout(r, 50));
      const r = await children.run(process.execPath, [KLD, 'projections', 'rebuild'], {
        env: { KL_DATA_DIR: dataDir, KL_LOG_LEVEL: 'error' },
      });
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/^state-raw: \d+ events replayed$/m);
      const again = await startKld({ KL_DATA_DIR: dataDir });
      try {
        expect(await (await fetch(`${again.url}/v1/states/ops/crashed`)).text()).toBe(before);
        const resources = await (
          await fetch(`${again.url}/v1/api/states/ops/crashed/resources`)
        ).json();
        expect(JSON.stringify(resources)).toContain('terraform_data.a');
        // It served them as they were: no rebuild of its own.
        expect(again.output()).not.toContain('read models are empty');
      } finally {
        expect((await again.stop()).code).toBe(0);
      }
    });
  });

  it.each([
    ['KL_LISTEN', 'not-an-address', /^kld: KL_LISTEN: expected host:port/],
    ['KL_LOG_LEVEL', 'loud', /^kld: KL_LOG_LEVEL: expected one of/],
    ['KL_LOG_FORMAT', 'xml', /^kld: KL_LOG_FORMAT: expected one of auto, json, pretty/],
    [
      'KL_DATABASE_URL',
      'mysql://kl:PW-s3cret@db/kl',
      /^kld: KL_DATABASE_URL: expected postgres:\/\//,
    ],
    [
      'KL_DATABASE_URL',
      'postgres://kl:PW-s3cret@db:99999/kl',
      /^kld: KL_DATABASE_URL: not a valid/,
    ],
    ['KL_MAX_STATE_BYTES', 'huge', /^kld: KL_MAX_STATE_BYTES: expected a size/],
    ['KL_MAX_STATE_BYTES', '0', /^kld: KL_MAX_STATE_BYTES: expected a size from 1KiB to 512MiB/],
    ['KL_MAX_LOCK_BYTES', '1GiB', /^kld: KL_MAX_LOCK_BYTES: expected a size from 1KiB to 1MiB/],
    ['KL_ALLOWED_ORIGINS', '*', /^kld: KL_ALLOWED_ORIGINS: expected comma-separated origins/],
  ])('a bad %s (%s) is one clear line and exit 2, showing no password', (name, value, message) => {
    const r = spawnSync(process.execPath, [KLD, 'serve'], {
      env: { ...process.env, [name]: value, KL_DATA_DIR: path.join(dir, 'data') },
      encoding: 'utf8',
    });
    expect(r.status).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(message);
    expect(r.stderr).not.toContain('s3cret');
    expect(fs.existsSync(path.join(dir, 'data'))).toBe(false);
  });
});
