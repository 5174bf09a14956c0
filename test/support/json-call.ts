/** A kld answer as a test reads it: the status and the parsed JSON body (null when empty). */
export interface JsonAnswer {
  status: number;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any -- JSON under test
}

/** One request to kld at `baseUrl` with a bearer token and a JSON body. */
export async function jsonCall(
  baseUrl: string,
  token: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<JsonAnswer> {
  const r = await fetch(`${baseUrl}${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  return { status: r.status, body: text === '' ? null : JSON.parse(text) };
}

/** A new token of `scopes`, made by `admin` through kld's API: its secret. */
export async function createToken(
  baseUrl: string,
  admin: string,
  name: string,
  scopes: string[],
): Promise<string> {
  const r = await jsonCall(baseUrl, admin, 'POST', '/v1/admin/tokens', { name, scopes });
  if (r.status !== 201) throw new Error(`token ${name}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.token as string;
}

/** How many events the log holds on `stream`, counted by `admin` through kld's query API. */
export async function eventCount(baseUrl: string, admin: string, stream: string): Promise<number> {
  const r = await jsonCall(baseUrl, admin, 'POST', '/v1/query', {
    sql: 'SELECT count(*)::int AS n FROM event_log WHERE stream = $1',
    params: [stream],
  });
  if (r.status !== 200) throw new Error(`event count of ${stream}: ${r.status}`);
  return r.body.rows[0][0] as number;
}
