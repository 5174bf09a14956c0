import type { Agent, ClientRequest, IncomingMessage, RequestOptions } from 'node:http';
import * as http from 'node:http';
import type * as https from 'node:https';
import { constants as bufferConstants } from 'node:buffer';
import * as os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { DomainError } from '../../domain/shared/domain-error';
import { isErrorCode } from '../../domain/shared/error-codes';
import { parseJsonExact, stringifyJson } from '../../domain/terraform/lossless-json';
import { redactUrls } from '../logging/redact';

export interface KldRequest {
  query?: Record<string, string | number | boolean | null | undefined>;
  /** Serialised as JSON, numbers beyond double precision exactly (see lossless-json). */
  json?: unknown;
  /** Sent verbatim, e.g. a state document streamed in chunks; `json` wins if both are set. */
  body?: string | Buffer | AsyncIterable<Uint8Array>;
  contentType?: string;
  signal?: AbortSignal;
  /**
   * An answer that lasts as long as it is read (`kl events --follow`): only
   * the idle bound applies to it, never the overall one.
   */
  endless?: boolean;
  /**
   * kld documents this request as safe to send again (a read, or a write
   * keyed by its run id that answers the same result twice): a 429 or 503
   * with Retry-After is waited out. GET and HEAD always are.
   */
  retry?: boolean;
}

export interface KldHttpOptions {
  token?: string;
  actor?: string;
  /** How long kld may send nothing; the process's bound (useRequestBounds) unless set. */
  idleTimeoutMs?: number;
  /** The most one request may take, its answer read to the end; the process's bound unless set. */
  timeoutMs?: number;
}

/** The bounds every request of this process keeps to, in ms; 0 is no bound. */
export interface RequestBounds {
  /** No byte from kld for this long, waiting for the answer or inside it (`--idle-timeout`). */
  idleMs: number;
  /** The whole request, its answer read to the end (`--request-timeout`); never an endless stream. */
  totalMs: number;
}

/** PEM client certificate and key every https request of this process presents. */
export interface ClientTls {
  cert: Buffer;
  key: Buffer;
}

/**
 * No byte from kld for 300 s, waiting for the answer or inside it, is a dead
 * connection (kld's event stream sends a comment every 15 s). No request of
 * kl's takes an hour when kld and the network are alive: a 100k-instance
 * export or a 20k-address commit takes seconds to minutes. The hour stops a
 * server (or proxy) that sends a byte now and then, which the idle bound
 * alone would let hang kl, and a CI job with it, forever.
 */
export const DEFAULT_BOUNDS: Readonly<RequestBounds> = { idleMs: 300_000, totalMs: 3_600_000 };
const bounds: RequestBounds = { ...DEFAULT_BOUNDS };

/** Sets the bounds of every later request of this process (`kl --request-timeout`, `--idle-timeout`). */
export function useRequestBounds(given: Partial<RequestBounds>): void {
  Object.assign(bounds, given);
}

/**
 * An error answer is a code and a message, or a proxy's page: a megabyte is
 * far beyond any. kl reads no further, and says the answer was cut.
 */
export const MAX_ERROR_BYTES = 1024 * 1024;

/**
 * A 409 may list what conflicts, before its code and message: the holders
 * of a conflict, the addresses of a stale plan or of writes not reserved,
 * ~300 bytes each. 64 MiB holds those of plans far beyond 100k addresses.
 */
export const MAX_CONFLICT_BYTES = 64 * 1024 * 1024;

/** The most kl reads of an error answer of this status. */
export function errorBound(status: number): number {
  return status === 409 ? MAX_CONFLICT_BYTES : MAX_ERROR_BYTES;
}

/** What kld may ask kl to wait out (429, 503 with Retry-After), and how often. */
const MAX_RETRIES = 3;
const MAX_RETRY_WAIT_MS = 60_000;
const RETRIED: Record<number, string> = { 429: 'too many requests', 503: 'unavailable' };

/**
 * The most kl reads of one answer it holds whole: an answer that is parsed
 * must fit in one string, so nothing larger is a real answer. A server (or
 * a proxy) sending more is stopped there instead of filling kl's memory.
 * Streams (events, archives) are not held and not bounded.
 */
export const MAX_ANSWER_BYTES = bufferConstants.MAX_STRING_LENGTH;

let clientTls: ClientTls | null = null;
const agents: { http?: Agent; https?: Agent } = {};

/**
 * Makes every later https request of this process present this certificate
 * (`kl --client-cert`); checked by the caller (client-certificate.ts).
 */
export function useClientCertificate(tls: ClientTls): void {
  clientTls = tls;
  delete agents.https;
}

/**
 * The connections of this process, one pool per scheme. Idle kept-alive
 * sockets are unreferenced by Node's agent, so they never hold kl open after
 * its answer, while `kl refresh`'s many uploads reuse one connection. node:https
 * (and with it TLS and crypto) is loaded only for an https server.
 */
function agentFor(protocol: string): { agent: Agent; request: typeof http.request } {
  if (protocol === 'https:') {
    // Required here, not imported: an http kld never loads TLS.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const tls = require('node:https') as typeof https;
    agents.https ??= new tls.Agent({ keepAlive: true, ...(clientTls ?? {}) });
    return { agent: agents.https, request: tls.request };
  }
  agents.http ??= new http.Agent({ keepAlive: true });
  return { agent: agents.http, request: http.request };
}

/** What was read of a body: its first bytes, and whether more followed. */
interface Read {
  bytes: Buffer;
  /** More than the bytes came (or were announced): kl read no further. */
  cut: boolean;
}

/** kld's answer: status, headers, and the body read once (kept, so it can be read again). */
export class KldResponse {
  readonly status: number;
  readonly statusText: string;
  private read: Promise<Read> | null = null;

  constructor(
    /** The body as it arrives, for streams (events, archives): an async iterable of Buffers. */
    readonly body: IncomingMessage,
    private readonly base: string,
  ) {
    this.status = body.statusCode ?? 0;
    this.statusText = body.statusMessage ?? '';
  }

  get ok(): boolean {
    return this.status >= 200 && this.status < 300;
  }

  header(name: string): string | null {
    const value = this.body.headers[name.toLowerCase()];
    if (value === undefined) return null;
    return Array.isArray(value) ? value.join(', ') : value;
  }

  /**
   * The whole body; more than `limit` bytes (announced or sent) is refused.
   * An error answer is bounded far lower than an answer (errorBound).
   */
  async buffer(limit = this.ok ? MAX_ANSWER_BYTES : errorBound(this.status)): Promise<Buffer> {
    const { bytes, cut } = await this.upTo(limit);
    if (cut || bytes.length > limit) {
      throw new DomainError(
        'SERVER.UNEXPECTED_ANSWER',
        redactUrls(`the answer from kld at ${this.base} is larger than ${limit} bytes`),
      );
    }
    return bytes;
  }

  /**
   * At most `limit` bytes of the body, and whether more followed (then its
   * connection is dropped). Read once: a later call gets what the first one
   * read, whatever its limit (a refusal's details, then its message).
   */
  upTo(limit: number): Promise<Read> {
    this.read ??= this.readBody(limit);
    return this.read;
  }

  private async readBody(limit: number): Promise<Read> {
    // An answer announced too large is not read at all; an error's first bytes say what it is.
    if (this.ok && Number(this.header('content-length') ?? 0) > limit) {
      this.body.destroy();
      return { bytes: Buffer.alloc(0), cut: true };
    }
    const chunks: Buffer[] = [];
    let size = 0;
    try {
      for await (const chunk of this.body) {
        const room = limit - size;
        size += (chunk as Buffer).length;
        if (size > limit) {
          chunks.push((chunk as Buffer).subarray(0, room));
          this.body.destroy();
          return { bytes: Buffer.concat(chunks), cut: true };
        }
        chunks.push(chunk as Buffer);
      }
    } catch (err) {
      // kl's own bounds name the request and the bound already.
      if (err instanceof DomainError) throw err;
      throw new DomainError(
        'SERVER.UNREACHABLE',
        redactUrls(`the answer from kld at ${this.base} broke off (${reason(err)})`),
      );
    }
    return { bytes: Buffer.concat(chunks), cut: false };
  }

  async text(): Promise<string> {
    return (await this.buffer()).toString('utf8');
  }

  async json(): Promise<unknown> {
    return JSON.parse(await this.text());
  }

  /**
   * The body is not wanted: a short one is read off so its connection can be
   * reused, a long one (a state document) drops its connection instead.
   */
  discard(): void {
    if (this.read !== null || this.body.complete) return;
    const length = Number(this.header('content-length') ?? Infinity);
    if (length <= 65_536) this.body.resume();
    else this.body.destroy();
  }
}

/**
 * The smallest client of kld's REST API, on node:http(s): Node's fetch costs
 * kl ~0.2 s CPU at start-up (loading undici, compiling its HTTP parser). Every
 * failure is a DomainError with a one-line message: the server's own
 * `{error:{code,message}}` when it sent one, the server URL when it cannot be
 * reached. Credentials in the server URL are sent as Basic authentication.
 */
export class KldHttpClient {
  readonly base: string;

  constructor(
    server: string,
    private readonly options: KldHttpOptions = {},
  ) {
    this.base = server.replace(/\/+$/, '');
  }

  /** How long kld may send nothing (ms; 0: no bound). */
  get idleMs(): number {
    return this.options.idleTimeoutMs ?? bounds.idleMs;
  }

  /** The answer parsed with every number exact: those beyond double precision come back marked. */
  async json<T>(method: string, path: string, request: KldRequest = {}): Promise<T> {
    const res = await this.send(method, path, request);
    if (!res.ok) throw await errorOf(res);
    const text = await res.text();
    try {
      return parseJsonExact(text) as T;
    } catch (err) {
      // A proxy's page, a compressed body, a cut-off or absurdly nested answer.
      const encoding = res.header('content-encoding');
      throw new DomainError(
        'SERVER.UNEXPECTED_ANSWER',
        `kld's answer to ${method} ${path.split('?')[0]} is not JSON` +
          ` (${encoding ? `content-encoding ${encoding}; ` : ''}${firstLine((err as Error).message).slice(0, 120)})`,
      );
    }
  }

  /**
   * The answer once its headers are in; the caller decides which statuses are
   * answers. A request kld documents as safe to repeat (see KldRequest.retry)
   * waits out a 429 or 503 that says when to come back, a few times.
   */
  async send(method: string, path: string, request: KldRequest = {}): Promise<KldResponse> {
    let url: URL;
    try {
      url = new URL(this.base + path);
    } catch {
      throw this.unreachable('not a URL');
    }
    for (const [k, v] of Object.entries(request.query ?? {})) {
      if (v !== undefined && v !== null) url.searchParams.set(k, String(v));
    }
    const headers: Record<string, string> = {
      'X-Kilolock-Actor': this.options.actor ?? defaultActor(),
    };
    if (this.options.token) headers.Authorization = `Bearer ${this.options.token}`;
    else if (url.username || url.password) {
      const user = `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`;
      headers.Authorization = `Basic ${Buffer.from(user).toString('base64')}`;
    }
    if (headers.Authorization && url.protocol === 'http:') {
      warnCleartext(url, this.options.token ? 'the token' : 'the password');
    }
    let body = request.body;
    if (request.contentType) headers['Content-Type'] = request.contentType;
    if (request.json !== undefined) {
      headers['Content-Type'] = 'application/json';
      body = stringifyJson(request.json);
    }
    if (typeof body === 'string') body = Buffer.from(body);
    if (Buffer.isBuffer(body)) headers['Content-Length'] = String(body.length);
    const options: RequestOptions = {
      method,
      headers,
      host: url.hostname.replace(/^\[|\]$/g, ''),
      port: url.port || undefined,
      path: url.pathname + url.search,
      signal: request.signal,
    };
    const name = `${method} ${path.split('?')[0]}`;
    // A streamed body cannot be sent twice.
    const repeatable =
      (method === 'GET' || method === 'HEAD' || request.retry === true) &&
      (body === undefined || Buffer.isBuffer(body));
    for (let retries = 0; ; retries++) {
      request.signal?.throwIfAborted();
      const res = await this.attempt(url.protocol, options, body, request, name);
      const wait = repeatable && retries < MAX_RETRIES ? this.retryWait(res) : null;
      if (wait === null) return res;
      res.discard();
      process.stderr.write(
        `kl: kld answered ${res.status} (${RETRIED[res.status]}) to ${name}; trying again in ${seconds(wait)} s (${retries + 1} of ${MAX_RETRIES})\n`,
      );
      await sleep(wait, undefined, { signal: request.signal, ref: true });
    }
  }

  /** One exchange, within the idle bound and (unless endless) the overall one. */
  private attempt(
    protocol: string,
    options: RequestOptions,
    body: Buffer | AsyncIterable<Uint8Array> | undefined,
    request: KldRequest,
    name: string,
  ): Promise<KldResponse> {
    const { agent, request: open } = agentFor(protocol);
    const idleMs = this.idleMs;
    const totalMs = request.endless ? 0 : (this.options.timeoutMs ?? bounds.totalMs);
    return new Promise<KldResponse>((resolve, reject) => {
      let answer: IncomingMessage | undefined;
      let overall: NodeJS.Timeout | undefined;
      const req = open({ ...options, agent }, (res) => {
        answer = res;
        // An error reaches whoever reads the answer; one nobody reads yet must not end kl.
        res.on('error', () => {});
        res.once('close', () => clearTimeout(overall));
        resolve(new KldResponse(res, this.base));
      });
      // The bound's own error, for a reader of the answer too (else it sees ECONNRESET).
      const stop = (err: DomainError) => {
        // A whole answer is done with: its socket may already serve another request.
        if (answer?.complete) return;
        answer?.destroy(err);
        req.destroy(err);
      };
      if (idleMs > 0) {
        req.setTimeout(idleMs, () =>
          stop(
            this.bound(
              `${name}: nothing from kld at ${this.base} for ${seconds(idleMs)} s`,
              '--idle-timeout or KL_IDLE_TIMEOUT',
            ),
          ),
        );
      }
      if (totalMs > 0) {
        overall = setTimeout(
          () =>
            stop(
              this.bound(
                `${name}: kld at ${this.base} did not finish answering within ${seconds(totalMs)} s`,
                '--request-timeout or KL_REQUEST_TIMEOUT',
              ),
            ),
          totalMs,
        ).unref();
      }
      req.on('error', (err) => {
        clearTimeout(overall);
        if (err instanceof DomainError || request.signal?.aborted) reject(err);
        else reject(this.unreachable(reason(err)));
      });
      if (body === undefined) req.end();
      else if (Buffer.isBuffer(body)) req.end(body);
      else
        writeAll(req, body).catch((err: unknown) =>
          req.destroy(err instanceof Error ? err : new Error(String(err))),
        );
    });
  }

  /** How long kld asks kl to wait before this request again; null: not now, report it. */
  private retryWait(res: KldResponse): number | null {
    if (!(res.status in RETRIED)) return null;
    const wait = retryAfterMs(res.header('retry-after'), Date.now());
    return wait !== null && wait <= MAX_RETRY_WAIT_MS ? wait : null;
  }

  private bound(what: string, setting: string): DomainError {
    return new DomainError('SERVER.UNREACHABLE', redactUrls(`${what} (the bound: ${setting})`));
  }

  private unreachable(why: string): DomainError {
    return new DomainError(
      'SERVER.UNREACHABLE',
      redactUrls(`cannot reach kld at ${this.base} (${why}); set --server or KL_SERVER_URL`),
    );
  }
}

/** Retry-After in seconds or as an HTTP date, as ms from `now`; null when it is neither. */
export function retryAfterMs(value: string | null, now: number): number | null {
  const text = value?.trim() ?? '';
  if (/^\d{1,9}$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  return /[a-z]/i.test(text) && Number.isFinite(at) ? Math.max(0, at - now) : null;
}

function seconds(ms: number): string {
  return String(ms / 1000);
}

let warnedCleartext = false;

/**
 * Plain http to another machine shows the token (or password) to anyone on
 * the way; kl still sends it (a private network may be trusted), but says so
 * once per run. On this machine's loopback nothing crosses a network.
 */
function warnCleartext(url: URL, what: string): void {
  const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (warnedCleartext || isLoopback(host)) return;
  warnedCleartext = true;
  process.stderr.write(
    `kl: warning: ${what} goes to ${url.protocol}//${url.host} unencrypted (http, not https): anyone on the network between can read and reuse it\n`,
  );
}

function isLoopback(host: string): boolean {
  return (
    host === 'localhost' ||
    host.endsWith('.localhost') ||
    host === '::1' ||
    /^(::ffff:)?127\.\d+\.\d+\.\d+$/.test(host) ||
    /^::ffff:7f[0-9a-f]{2}:[0-9a-f]{1,4}$/.test(host)
  );
}

/** A streamed body, chunk by chunk at the pace the connection takes them (chunked encoding). */
async function writeAll(req: ClientRequest, body: AsyncIterable<Uint8Array>): Promise<void> {
  for await (const chunk of body) {
    if (!req.write(chunk)) {
      await new Promise<void>((resolve, reject) => {
        const done = (err?: Error) => {
          req.off('drain', done).off('close', closed);
          if (err) reject(err);
          else resolve();
        };
        const closed = () => done(new Error('connection closed'));
        req.once('drain', done).once('close', closed);
      });
    }
  }
  req.end();
}

function reason(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  return e?.code ?? e?.message ?? String(err);
}

/** What errorOf reads of an answer (a fetch Response has it too). */
export interface AnswerText {
  status: number;
  statusText: string;
  text(): Promise<string>;
  /** A KldResponse's headers: a redirect's Location is named in its refusal. */
  header?(name: string): string | null;
  /** A KldResponse's bounded read of an error (errorBound). */
  upTo?(limit: number): Promise<Read>;
}

/** The server's error as a DomainError carrying its code, so callers can match on it. */
export async function errorOf(res: AnswerText): Promise<DomainError> {
  const { bytes, cut } = res.upTo
    ? await res.upTo(errorBound(res.status)).catch(() => ({ bytes: Buffer.alloc(0), cut: false }))
    : { bytes: Buffer.from(await res.text().catch(() => '')), cut: false };
  const text = bytes.toString('utf8');
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
  // Never followed: the token would go wherever a server or proxy points.
  const location = res.status >= 300 && res.status < 400 ? res.header?.('location') : null;
  const moved = location
    ? ` (to ${redactUrls(location).slice(0, 200)}; kl does not follow redirects: give that URL as --server)`
    : '';
  const more = cut ? ` (an error answer of more than ${bytes.length} bytes, cut there)` : '';
  return new DomainError(
    'SERVER.UNEXPECTED_ANSWER',
    `kld answered ${`${res.status} ${res.statusText}`.trim()}${moved}${more}${detail ? `: ${detail}` : ''}`,
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
