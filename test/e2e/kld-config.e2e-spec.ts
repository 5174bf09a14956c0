import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { KLD, startKld } from '../support/kld-process';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/** `kld --config kld.yaml`, and `kld config`, as an operator runs them. */
describe('kld --config', () => {
  let t: TestDatabase;
  let dir: string;
  beforeAll(async () => {
    t = await createTestDatabase();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-config-e2e-'));
  });
  afterAll(async () => {
    fs.rmSync(dir, { recursive: true, force: true });
    await t.drop();
  });
  const env = () => {
    const e: NodeJS.ProcessEnv = { ...process.env };
    for (const k of Object.keys(e)) if (k.startsWith('KL_')) delete e[k];
    return e;
  };
  const kld = (args: string[], extra: NodeJS.ProcessEnv = {}) =>
    spawnSync(process.execPath, [KLD, ...args], {
      env: { ...env(), ...extra },
      encoding: 'utf8',
      timeout: 30_000,
    });

  it('serves with the database and settings of the file', async () => {
    const file = path.join(dir, 'kld.yaml');
    fs.writeFileSync(file, `KL_DATABASE_URL: ${t.url}\nKL_MAX_LOCK_BYTES: 1KiB\n`);
    const server = await startKld({ KL_DATABASE_URL: undefined }, 30_000, {
      args: ['--config', file],
    });
    try {
      // the file's KL_MAX_LOCK_BYTES holds: a 2 KiB lock body is too large
      const r = await fetch(`${server.url}/v1/states/cfg`, {
        method: 'LOCK',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ ID: 'x', Info: 'i'.repeat(2048) }),
      });
      expect(r.status).toBe(413);
      const ok = await fetch(`${server.url}/v1/states/cfg`, {
        method: 'LOCK',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ ID: 'from-config' }),
      });
      expect(ok.status).toBe(200);
    } finally {
      expect((await server.stop()).code).toBe(0);
    }
    // the lock went to the file's database
    const rows = await t.db.query(
      `SELECT data->>'lockId' AS id FROM kl_events WHERE type = 'LockAcquired'`,
    );
    expect(rows).toEqual([{ id: 'from-config' }]);
  });

  it('prints the effective configuration with sources, the password masked', () => {
    const file = path.join(dir, 'show.yaml');
    fs.writeFileSync(
      file,
      'KL_DATABASE_URL: postgres://kl:s3cret@db.internal:5432/kl\nKL_LISTEN: 0.0.0.0:9000\n',
    );
    const r = kld(['config', '--config', file], { KL_LISTEN: '127.0.0.1:7000' });
    expect(r.status).toBe(0);
    expect(r.stdout).not.toContain('s3cret');
    expect(r.stdout).toContain(
      `KL_DATABASE_URL: "postgres://kl:***@db.internal:5432/kl" # ${file}`,
    );
    expect(r.stdout).toContain('KL_LISTEN: "127.0.0.1:7000" # environment');
    expect(r.stdout).toContain('KL_LOG_LEVEL: "info" # default');
  });

  it.each([
    ['a bad value', 'KL_MAX_STATE_BYTES: lots\n', /^kld: KL_MAX_STATE_BYTES: expected a size/],
    ['an unknown name', 'KL_LISTN: :1\n', /^kld: .*bad\.yaml: line 1: unknown setting "KL_LISTN"/],
  ])('refuses %s with one line and exit status 2, for serve and config alike', (_w, text, re) => {
    const file = path.join(dir, 'bad.yaml');
    fs.writeFileSync(file, text);
    for (const args of [
      ['--config', file, 'serve'],
      ['config', '--config', file],
    ]) {
      const r = kld(args);
      expect(r.status).toBe(2);
      expect(r.stderr).toMatch(re);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stdout).toBe('');
    }
  });

  it('says when the file does not exist', () => {
    const r = kld(['--config', path.join(dir, 'missing.yaml'), 'migrate']);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/^kld: --config .*missing\.yaml: no such file\n$/);
  });
});
