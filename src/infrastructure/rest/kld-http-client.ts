import * as os from 'node:os';
import { DomainError } from '../../domain/shared/domain-error';
import { isErrorCode } from '../../domain/shared/error-codes';
import { parseJsonExact, stringifyJson } from '../../domain/terraform/lossless-json';
import { redactUrls } from '../logging/redact';

export interface KldRequest {
  query?: Record<string, string | number | boolean | null | undefined>;
  /** Serialised as JSON, numbers beyond double precision exactly (see lossless-json). */
  json?: unknown;
  /** Sent verbatim, e.g. a state document streamed from a file; `json` wins if both are set. */
  body?: string | Buffer | ReadableStream<Uint8Array>;
  contentType?: string;
  signal?: AbortSignal;
}

export interface KldHttpOptions {
  token?: string;
  actor?: string;
}

/**
 * The smallest fetch client of kld's REST API. Every failure is a
 * DomainError with a one-line message: the server's own `{error:{code,message}}`
 * when it sent one, the server URL when it cannot be reached.
 */
export class KldHttpClient {
  readonly base: string;

  constructor(
    server: string,
    private readonly options: KldHttpOptions = {},
  ) {
    this.base = server.replace(/\/+$/, '');
  }

  /** The answer parsed with every number exact: those beyond double precision come back marked. */
  async json<T>(method: string, path: string, request: KldRequest = {}): Promise<T> {
    const res = await this.send(method, path, request);
    if (!res.ok) throw await errorOf(res);
    return parseJsonExact(await res.text()) as T;
  }

  /** The raw response; the caller decides which statuses are answers. */
  async send(method: string, path: string, request: KldRequest = {}): Promise<Response> {
    const url = new URL(this.base + path);
    for (const [k, v] of Object.entries(request.query ?? {})) {
      if (v !== undefined && v !== null) url.searchParams.set(k, String(v));
    }
    const headers: Record<string, string> = {
      'X-Kilolock-Actor': this.options.actor ?? defaultActor(),
    };
    if (this.options.token) headers.Authorization = `Bearer ${this.options.token}`;
    let body = request.body;
    if (request.contentType) headers['Content-Type'] = request.contentType;
    if (request.json !== undefined) {
      headers['Content-Type'] = 'application/json';
      body = stringifyJson(request.json);
    }
    const init: RequestInit & { duplex?: 'half' } = {
      method,
      headers,
      body,
      signal: request.signal,
    };
    // fetch streams a request body only in half-duplex mode.
    if (body instanceof ReadableStream) init.duplex = 'half';
    try {
      return await fetch(url, init);
    } catch (err) {
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      const why = cause?.code ?? cause?.message ?? (err as Error).message;
      throw new DomainError(
        'SERVER.UNREACHABLE',
        // A URL with credentials is refused by fetch with the URL in its message.
        redactUrls(`cannot reach kld at ${this.base} (${why}); set --server or KL_SERVER_URL`),
      );
    }
  }
}

/** The server's error as a DomainError carrying its code, so callers can match on it. */
export async function errorOf(res: Response): Promise<DomainError> {
  const text = await res.text().catch(() => '');
  try {
    const body = JSON.parse(text) as {
      error?: { code?: unknown; message?: unknown };
      ID?: unknown;
      Who?: unknown;
    };
    // A lock conflict answers with the holder's LockInfo, as terraform expects.
    if (typeof body.ID === 'string') {
      const who = typeof body.Who === 'string' ? body.Who : 'someone';
      return new DomainError('STATE.LOCKED', `locked by ${who} (lock ${body.ID})`, {
        status: res.status,
      });
    }
    if (body.error && typeof body.error.message === 'string') {
      const { code } = body.error;
      // A newer kld may send a code this kl does not know: keep its message.
      return isErrorCode(code)
        ? new DomainError(code, firstLine(body.error.message), { status: res.status })
        : new DomainError('SERVER.UNEXPECTED_ANSWER', firstLine(body.error.message), {
            status: res.status,
            serverCode: typeof code === 'string' ? code : null,
          });
    }
  } catch {
    // not our JSON error body
  }
  const detail = firstLine(text).slice(0, 200);
  return new DomainError(
    'SERVER.UNEXPECTED_ANSWER',
    `kld answered ${`${res.status} ${res.statusText}`.trim()}${detail ? `: ${detail}` : ''}`,
    { status: res.status },
  );
}

export function statePath(state: string): string {
  return state.split('/').map(encodeURIComponent).join('/');
}

function firstLine(text: string): string {
  return (
    text
      .split('\n')
      .find((l) => l.trim() !== '')
      ?.trim() ?? ''
  );
}

export function defaultActor(): string {
  if (process.env.KL_ACTOR) return process.env.KL_ACTOR;
  try {
    return `${os.userInfo().username}@${os.hostname()}`;
  } catch {
    return `kl@${os.hostname()}`;
  }
}
