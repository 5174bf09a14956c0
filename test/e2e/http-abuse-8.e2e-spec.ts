import * as net from 'node:net';
import { hostileTeams, HostileTeams, TEAM_A_STATE } from '../support/hostile-teams';
import { createToken } from '../support/json-call';
import { oneResourceState } from '../../bench/support/one-resource-state';

/**
 * Hostile sweep 8: what one request makes kld write, and to whom. A big JSON
 * answer (a query's rows) is written a piece per turn, and a reader that
 * stops taking it is cut off instead of holding it for good, after kld's
 * idle bound, which also ends a kept-alive connection left idle; a token a
 * client puts in a URL never reaches the log.
 */

jest.setTimeout(240_000);

/**
 * kld's idle bound (KL_HTTP_IDLE_TIMEOUT; 65 s by default), after which a
 * reader that stopped is cut off: short, so that the test waits past it in seconds.
 */
const IDLE_S = 5;
/** How long past the bound the reader waits before reading again: kld checks every second. */
const MARGIN_S = 5;

const doc = (serial: number, count: number) =>
  oneResourceState({ serial, count, lineage: 'abuse8' });

describe('hostile sweep 8', () => {
  let teams: HostileTeams;

  beforeAll(async () => {
    teams = await hostileTeams('kl_http_abuse8', doc(1, 20), doc(1, 3), {
      KL_HTTP_IDLE_TIMEOUT: `${IDLE_S}s`,
    });
  });

  afterAll(async () => {
    await teams?.stop();
  });

  it('a query answer of 50 MB whose reader stops is cut off, kld serving meanwhile and after', async () => {
    const { kld, reader, call } = teams;
    const analyst = await createToken(kld.url, teams.admin, 'team-a-analyst', [
      'read:team-a/*',
      'query',
    ]);
    const rows = 100_000;
    const body = JSON.stringify({
      sql: `SELECT g, repeat('x', 500) AS pad FROM generate_series(1, ${rows}) g`,
      max_rows: rows,
    });
    const port = Number(new URL(kld.url).port);
    const socket = net.connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    const chunks: Buffer[] = [];
    let stoppedAt = 0;
    await new Promise<void>((resolve, reject) => {
      socket.once('data', (chunk: Buffer) => {
        chunks.push(chunk);
        // The reader stops here.
        socket.pause();
        stoppedAt = Date.now();
        resolve();
      });
      socket.once('close', () => reject(new Error('kld closed the query before answering')));
      socket.write(
        `POST /v1/query HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${analyst}\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
    });
    expect(chunks[0].toString('latin1')).toMatch(/^HTTP\/1\.1 200 /);
    // Meanwhile the others are served.
    await teams.unchanged();
    // Past kld's silent-reader bound (IDLE_S from the last byte taken), the reader
    // reads again: what kld had let go of before is all that comes, then the end.
    const pastBound = stoppedAt + (IDLE_S + MARGIN_S) * 1000 - Date.now();
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, pastBound)));
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.resume();
    let giveUp: NodeJS.Timeout | undefined;
    const ended = await Promise.race([
      closed.then(() => true),
      new Promise<boolean>((resolve) => (giveUp = setTimeout(() => resolve(false), 60_000))),
    ]);
    clearTimeout(giveUp);
    socket.destroy();
    expect(ended).toBe(true);
    // Cut off: the chunked answer never got its last chunk. Before, kld held all
    // of it for this reader and wrote it out whole once the reader came back.
    const text = Buffer.concat(chunks).toString('latin1');
    expect(text.endsWith('\r\n0\r\n\r\n')).toBe(false);
    expect(text.length).toBeLessThan(40 * 1024 * 1024);
    // A reader that takes it gets all of it, whole.
    const whole = await call(analyst, 'POST', '/v1/query', JSON.parse(body));
    expect(whole.status).toBe(200);
    expect((whole.body.rows as unknown[]).length).toBe(rows);
    expect(whole.body.truncated).toBe(false);
    expect((await call(reader, 'GET', `/v1/states/${TEAM_A_STATE}`)).status).toBe(200);
  });

  it('a kept-alive connection left idle is closed after the bound, which the answer names; a gRPC one too', async () => {
    // The same bound ends a gRPC connection with no call (GOAWAY), one that never sent a byte too.
    const grpcAt = Date.now();
    const grpc = net.connect(
      Number(teams.kld.grpc.slice(teams.kld.grpc.lastIndexOf(':') + 1)),
      '127.0.0.1',
    );
    grpc.on('error', () => undefined);
    // Read (kld's SETTINGS, then its GOAWAY): a socket that reads nothing never sees the end.
    grpc.on('data', () => undefined);
    const grpcClosed = new Promise<number>((resolve) =>
      grpc.once('close', () => resolve(Date.now())),
    );
    const socket = net.connect(Number(new URL(teams.kld.url).port), '127.0.0.1');
    socket.on('error', () => undefined);
    let closed = false;
    socket.once('close', () => (closed = true));
    const answer = await new Promise<string>((resolve, reject) => {
      let text = '';
      socket.on('data', (chunk: Buffer) => {
        text += chunk.toString('latin1');
        if (text.includes('\r\n\r\n') && text.endsWith('}')) resolve(text);
      });
      socket.once('close', () => reject(new Error('kld closed the connection before answering')));
      socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    });
    const answeredAt = Date.now();
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer).toMatch(new RegExp(`\r\nKeep-Alive: timeout=${IDLE_S}\r\n`, 'i'));
    expect(closed).toBe(false);
    // By default kld keeps them 65 s: longer than a load balancer in front of it.
    const pastBound = answeredAt + (IDLE_S + MARGIN_S) * 1000 - Date.now();
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, pastBound)));
    const httpOpen = !closed;
    socket.destroy();
    expect(httpOpen).toBe(false);
    // grpc-js checks its idle bound on a timer, and a check that falls a millisecond
    // short (one connection in eight) waits a whole bound more: closed within two.
    let giveUp: NodeJS.Timeout | undefined;
    const grpcClosedAt = await Promise.race([
      grpcClosed,
      new Promise<null>((resolve) => {
        giveUp = setTimeout(
          () => resolve(null),
          grpcAt + (2 * IDLE_S + MARGIN_S) * 1000 - Date.now(),
        );
      }),
    ]);
    clearTimeout(giveUp);
    grpc.destroy();
    const grpcIdleMs = grpcClosedAt === null ? null : grpcClosedAt - grpcAt;
    expect(grpcIdleMs).not.toBeNull();
    // Not before the bound, though.
    expect(grpcIdleMs ?? -1).toBeGreaterThanOrEqual((IDLE_S - 1) * 1000);
  });

  it('a token a client puts in a URL is masked in the log after its prefix', async () => {
    const { kld, reader } = teams;
    const mark = kld.output().length;
    const urls = [
      `/v1/api/states?token=${reader}`,
      `/v1/states/${TEAM_A_STATE}?access_token=${reader}`,
      `/v1/nothing/${reader}`,
    ];
    for (const url of urls) {
      const r = await fetch(`${kld.url}${url}`, { headers: { Authorization: `Bearer ${reader}` } });
      await r.arrayBuffer();
      expect(r.status).toBeLessThan(500);
    }
    // Without a valid token in the header, refused: still not logged.
    const refused = await fetch(`${kld.url}/v1/api/states?token=${reader}`);
    await refused.arrayBuffer();
    expect(refused.status).toBe(401);
    let logged = '';
    for (let i = 0; i < 50 && (logged.match(/"msg":"request"/g) ?? []).length < 4; i++) {
      await new Promise((r) => setTimeout(r, 100));
      logged = kld.output().slice(mark);
    }
    expect((logged.match(/"msg":"request"/g) ?? []).length).toBeGreaterThanOrEqual(4);
    expect(logged).not.toContain(reader);
    expect(logged).toContain(`${reader.slice(0, 11)}***`);
  });
});
