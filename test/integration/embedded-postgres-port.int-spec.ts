import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { Client } from 'pg';
import { EmbeddedPostgres, freePort } from '../../src/infrastructure/postgres/embedded-postgres';

describe('embedded PostgreSQL, when its port is taken before it binds', () => {
  let dir: string;
  let holder: net.Server;
  let held: number;
  const accepted: net.Socket[] = [];
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-pg-port-'));
    // Accepts and never answers, as a foreign process on the port might.
    holder = net.createServer((socket) => accepted.push(socket));
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    held = (holder.address() as net.AddressInfo).port;
  });
  afterAll(async () => {
    for (const socket of accepted) socket.destroy();
    await new Promise((resolve) => holder.close(resolve));
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('starts on another port, says so, and serves', async () => {
    const lines: string[] = [];
    const logger = pino(
      { level: 'info' },
      new Writable({ write: (chunk: Buffer, _e, done) => (lines.push(chunk.toString()), done()) }),
    );
    const picks = [held];
    const pg = await EmbeddedPostgres.start(dir, logger, undefined, () =>
      picks.length ? Promise.resolve(picks.shift()!) : freePort(),
    );
    try {
      const port = Number(new URL(pg.url).port);
      expect(port).not.toBe(held);
      const client = new Client({ connectionString: pg.url });
      await client.connect();
      expect((await client.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
      await client.end();
      const taken = lines.map((l) => JSON.parse(l) as { msg: string; port?: number });
      expect(taken).toContainEqual(
        expect.objectContaining({
          msg: 'embedded PostgreSQL port was taken, trying another',
          port: held,
        }),
      );
    } finally {
      await pg.stop();
    }
  });
});

describe('embedded PostgreSQL, its first start', () => {
  it("hands initdb the password in a file in kld's data directory, never the shared temporary one", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-pg-init-'));
    try {
      // initdb runs as the postgres user when kld is root: the stand-in and
      // what it writes must be reachable by that user too.
      fs.chmodSync(dir, 0o755);
      const seen = path.join(dir, 'seen');
      fs.mkdirSync(seen, { mode: 0o777 });
      fs.chmodSync(seen, 0o777);
      const initdb = path.join(dir, 'initdb');
      // A stand-in that records where the password file is, then fails (as a
      // kld stopped during initdb leaves it: no cleanup after this point).
      fs.writeFileSync(
        initdb,
        `#!/bin/sh\nfor a in "$@"; do case "$a" in --pwfile=*) echo "\${a#--pwfile=}" > ${seen}/pwfile;; esac; done\nexit 1\n`,
        { mode: 0o755 },
      );
      const dataDir = path.join(dir, 'data');
      const logger = pino({ level: 'silent' });
      await expect(
        EmbeddedPostgres.start(dataDir, logger, { initdb, postgres: '/nonexistent' }),
      ).rejects.toThrow(/initdb failed/);
      const pwfile = fs.readFileSync(path.join(seen, 'pwfile'), 'utf8').trim();
      expect(path.dirname(pwfile)).toBe(dataDir);
      expect(fs.existsSync(pwfile)).toBe(false);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
