/**
 * Every request the dashboard makes: same origin, the session's token as a
 * bearer token when one is set, errors as kld's `{error: {code, message}}`.
 */

const TOKEN_KEY = 'kilolock.token';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

type Listener = () => void;
const tokenWanted = new Set<Listener>();
// A page's first request can be answered before the dialog has subscribed
// (requests start at the first render, effects run after paint): a 401 with
// nobody listening is kept for the first listener.
let unheardWant = false;

/** Called when kld answers 401: the app asks for a token. */
export function onTokenWanted(listener: Listener): () => void {
  tokenWanted.add(listener);
  if (unheardWant) {
    unheardWant = false;
    listener();
  }
  return () => tokenWanted.delete(listener);
}

function wantToken(): void {
  if (tokenWanted.size === 0) unheardWant = true;
  tokenWanted.forEach((l) => l());
}

export function setToken(token: string | null): void {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

export function hasToken(): boolean {
  return sessionStorage.getItem(TOKEN_KEY) !== null;
}

/** `askToken`: a 401 makes the app ask for a token (not for the event feed's own requests). */
export async function request(
  path: string,
  init: RequestInit = {},
  askToken = true,
): Promise<Response> {
  const headers = new Headers(init.headers);
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.set('Authorization', `Bearer ${token}`);
  let res: Response;
  try {
    res = await fetch(path, { ...init, headers, credentials: 'same-origin' });
  } catch {
    throw new ApiError(0, 'NETWORK', 'kld cannot be reached: is it running?');
  }
  if (res.ok) return res;
  if (res.status === 401 && askToken) wantToken();
  let code = `HTTP.${res.status}`;
  let message = `kld answered ${res.status} ${res.statusText}`;
  try {
    const body = (await res.json()) as { error?: { code?: unknown; message?: unknown } };
    if (typeof body.error?.code === 'string') code = body.error.code;
    if (typeof body.error?.message === 'string') message = body.error.message;
  } catch {
    // not JSON: keep the status line
  }
  throw new ApiError(res.status, code, message);
}

export async function getJson<T>(path: string): Promise<T> {
  return (await request(path)).json() as Promise<T>;
}

export async function postJson<T>(path: string, body: unknown): Promise<T> {
  const res = await request(path, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  return res.json() as Promise<T>;
}

/** `/v1/api/states/<name>/…`: names keep their slashes, addresses are one encoded segment. */
export function stateApi(name: string, rest = ''): string {
  return `/v1/api/states/${name.split('/').map(encodeURIComponent).join('/')}${rest}`;
}

export function query(params: Record<string, string | number | undefined | null>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params))
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}

/** Saves a blob as a file the browser downloads. */
export function saveFile(name: string, blob: Blob): void {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
