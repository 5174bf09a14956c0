import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { KLD, startKld } from '../support/kld-process';
import { testDocument } from '../support/state-harness';
import { createEmptyDatabase, TestDatabase } from '../support/test-database';

/**
 * What `kld` loads before it answers: operators run its commands in
 * scripts, and loading the whole server took seconds (docs/performance-history.md,
 * "kld start-up"). Help, the version, usage errors and `kld config` load
 * neither Nest nor pg; `kld migrate` loads pg and no Nest; `kld token create`
 * Nest's injector and no HTTP app; `kld serve` loads @nestjs/swagger only
 * when the API document is first asked for.
 */

let dir: string;
let t: TestDatabase;

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kld-startup-'));
  // Written when kld exits, and on SIGUSR2 while it runs: the files it loaded.
  fs.writeFileSync(
    path.join(dir, 'record.js'),
    `const fs = require('fs');
     const record = () => {
       const file = process.env.KL_TEST_MODULES;
       fs.writeFileSync(file + '.part', JSON.stringify(Object.keys(require.cache)));
       fs.renameSync(file + '.part', file);
     };
     process.on('exit', record);
     process.on('SIGUSR2', record);`,
  );
  t = await createEmptyDatabase('kl_kld_startup');
});

afterAll(async () => {
  await t.drop();
  fs.rmSync(dir, { recursive: true, force: true });
});

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
  /** The packages it loaded, by name (`@nestjs/core`, `pg`). */
  packages: Set<string>;
}

let runs = 0;
function kld(args: string[], env: Record<string, string> = {}): Promise<Ran> {
  const record = path.join(dir, `modules-${++runs}.json`);
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--require', path.join(dir, 'record.js'), KLD, ...args],
      {
        env: {
          ...process.env,
          KL_DATABASE_URL: t.url,
          KL_AUTH: 'off',
          ...env,
          KL_TEST_MODULES: record,
        },
      },
      (err, stdout, stderr) => {
        const code = err ? Number((err as { code?: number }).code) : 0;
        resolve({ code, stdout, stderr, packages: packagesIn(record) });
      },
    );
  });
}

/** The packages of the files a record lists, by name. */
function packagesIn(record: string): Set<string> {
  const files = JSON.parse(fs.readFileSync(record, 'utf8')) as string[];
  return new Set(
    files.flatMap((f) => {
      const m = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(f);
      return m ? [m[1]] : [];
    }),
  );
}

const SERVER = ['@nestjs/core', '@nestjs/common', 'pg', 'express', '@grpc/grpc-js', 'pino'];
const loaded = (r: Ran, names: string[]) => names.filter((n) => r.packages.has(n));

it('answers --help, --version and help of every command without loading the server', async () => {
  const help = await kld(['--help']);
  expect(help.code).toBe(0);
  expect(help.stdout).toMatch(/^Usage: kld /);
  expect(loaded(help, SERVER)).toEqual([]);

  const version = await kld(['--version']);
  expect(version.code).toBe(0);
  const { version: expected } = JSON.parse(
    fs.readFileSync(path.join(KLD, '../../../package.json'), 'utf8'),
  ) as { version: string };
  expect(version.stdout).toBe(`${expected}\n`);
  expect(loaded(version, SERVER)).toEqual([]);

  for (const command of [['serve'], ['token', 'create'], ['projections', 'skip']]) {
    const r = await kld([...command, '--help']);
    expect(r.stdout).toContain(`Usage: kld ${command.join(' ')} `);
    expect(loaded(r, SERVER)).toEqual([]);
  }
});

it('refuses an unknown command or flag in one line, exit 2, without loading the server', async () => {
  for (const args of [['nope'], ['migrate', '--bad'], ['projections', 'skip', 'p', '0']]) {
    const r = await kld(args);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(loaded(r, SERVER)).toEqual([]);
  }
});

it('serve refuses a wrong setting in one line without loading the server', async () => {
  const r = await kld(['serve', '--listen', '127.0.0.1:0'], { KL_HTTP_IDLE_TIMEOUT: '65' });
  expect(r.code).not.toBe(0);
  expect(r.stderr.trim().split('\n')).toEqual([expect.stringMatching(/KL_HTTP_IDLE_TIMEOUT/)]);
  expect(loaded(r, ['@nestjs/core', 'express', '@grpc/grpc-js'])).toEqual([]);
});

it('prints its configuration without loading Nest or pg', async () => {
  const r = await kld(['config']);
  expect(r.code).toBe(0);
  expect(r.stdout).toMatch(/KL_DATABASE_URL/);
  expect(loaded(r, ['@nestjs/core', '@nestjs/common', 'pg'])).toEqual([]);
});

it('migrates with pg and no Nest, and creates a token without the HTTP app', async () => {
  const migrate = await kld(['migrate']);
  expect(migrate.code).toBe(0);
  expect(migrate.packages.has('pg')).toBe(true);
  expect(loaded(migrate, ['@nestjs/core', '@nestjs/common', 'express'])).toEqual([]);

  const token = await kld(['token', 'create', '--name', 'startup', '--scope', 'admin']);
  expect(token.code).toBe(0);
  expect(token.stdout).toMatch(/\S{20,}/);
  expect(token.stderr).toMatch(/token "startup" created/);
  expect(token.packages.has('@nestjs/core')).toBe(true);
  expect(loaded(token, ['@nestjs/platform-express', 'express', '@grpc/grpc-js'])).toEqual([]);
});

it('serve loads @nestjs/swagger only when the API document is first asked for', async () => {
  const record = path.join(dir, 'serve-modules.json');
  const server = await startKld({
    KL_DATABASE_URL: t.url,
    KL_AUTH: 'off',
    KL_GRPC_LISTEN: 'off',
    NODE_OPTIONS: `--require ${path.join(dir, 'record.js')}`,
    KL_TEST_MODULES: record,
  });
  /** The packages kld has loaded by now. */
  const loadedNow = async () => {
    fs.rmSync(record, { force: true });
    server.child.kill('SIGUSR2');
    for (let i = 0; i < 100 && !fs.existsSync(record); i++) {
      await new Promise((r) => setTimeout(r, 50));
    }
    return packagesIn(record);
  };
  try {
    const state = `${server.url}/v1/states/startup/swagger`;
    const document = JSON.stringify(testDocument(1, [{ name: 'a', input: 'x' }]));
    const headers = { 'Content-Type': 'application/json' };
    expect((await fetch(state, { method: 'POST', body: document, headers })).status).toBe(200);
    const got = await fetch(state);
    expect([got.status, ((await got.json()) as { serial: number }).serial]).toEqual([200, 1]);
    const states = await fetch(`${server.url}/v1/api/states`);
    expect([states.status, JSON.stringify(await states.json())]).toEqual([
      200,
      expect.stringContaining('startup/swagger'),
    ]);
    // The record holds the server it ran: no swagger there is not an empty record.
    const before = await loadedNow();
    expect([before.has('@nestjs/core'), before.has('@nestjs/swagger')]).toEqual([true, false]);

    const api = await fetch(`${server.url}/openapi.json`);
    expect(api.status).toBe(200);
    const doc = (await api.json()) as { info: { title: string }; paths: object };
    expect(doc.info.title).toBe('Kilolock');
    expect(doc.paths).toHaveProperty(['/v1/states/{name}']);
    expect((await loadedNow()).has('@nestjs/swagger')).toBe(true);
  } finally {
    await server.stop();
  }
});
