import { bootstrapToken } from './auth';
import { createToken, jsonCall, JsonAnswer } from './json-call';
import { KldProcess, startKld } from './kld-process';
import { createTestDatabase, TestDatabase } from './test-database';

/**
 * The world the hostile sweeps attack: a kld with authentication on, an
 * admin, team A's writer and reader of `team-a/app`, team B's writer of
 * `team-b/app`, both states at serial 1.
 */
export interface HostileTeams {
  t: TestDatabase;
  kld: KldProcess;
  admin: string;
  writer: string;
  reader: string;
  other: string;
  call(token: string, method: string, path: string, body?: unknown): Promise<JsonAnswer>;
  /** Team A's state still at serial 1, and team B's state served meanwhile. */
  unchanged(): Promise<void>;
  stop(): Promise<void>;
}

export const TEAM_A_STATE = 'team-a/app';
export const TEAM_B_STATE = 'team-b/app';

export async function hostileTeams(
  database: string,
  teamADocument: unknown,
  teamBDocument: unknown,
  /** More of kld's environment (KL_HTTP_IDLE_TIMEOUT, for a sweep that waits past it). */
  env: Record<string, string> = {},
): Promise<HostileTeams> {
  const t = await createTestDatabase(database);
  const admin = bootstrapToken(t.url, 'root', ['admin', 'write:*', 'query', 'events']).secret;
  const kld = await startKld({ ...env, KL_DATABASE_URL: t.url, KL_AUTH: 'on' });
  const call = (token: string, method: string, path: string, body?: unknown) =>
    jsonCall(kld.url, token, method, path, body);
  const writer = await createToken(kld.url, admin, 'team-a-ci', ['write:team-a/*']);
  const reader = await createToken(kld.url, admin, 'team-a-viewer', ['read:team-a/*']);
  const other = await createToken(kld.url, admin, 'team-b-ci', ['write:team-b/*']);
  expect((await call(admin, 'POST', `/v1/states/${TEAM_A_STATE}`, teamADocument)).status).toBe(200);
  expect((await call(admin, 'POST', `/v1/states/${TEAM_B_STATE}`, teamBDocument)).status).toBe(200);
  return {
    t,
    kld,
    admin,
    writer,
    reader,
    other,
    call,
    async unchanged() {
      const r = await call(reader, 'GET', `/v1/states/${TEAM_A_STATE}`);
      expect([r.status, r.body.serial]).toEqual([200, 1]);
      expect((await call(other, 'GET', `/v1/states/${TEAM_B_STATE}`)).status).toBe(200);
    },
    async stop() {
      await kld.stop();
      await t.drop();
    },
  };
}
