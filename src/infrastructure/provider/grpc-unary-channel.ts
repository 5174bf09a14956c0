import { AsyncResource } from 'node:async_hooks';
import * as http2 from 'node:http2';
import * as net from 'node:net';
import * as tls from 'node:tls';

/**
 * Unary gRPC calls over one HTTP/2 connection (node:http2), all a plugin
 * client needs: a request message, a response message and a status. The
 * refresh makes one ReadResource call per instance; through @grpc/grpc-js
 * each call paid for its resolver, retry, load-balancing and filter layers,
 * about a third of kl's CPU per instance (docs/performance-history.md, "Refresh").
 * Framing is gRPC's own (PROTOCOL-HTTP2.md): a 5-byte prefix (compressed
 * flag, length) before each message, the status in trailers.
 */

/** The gRPC status codes this client produces or tells apart. */
export const GrpcStatus = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  DEADLINE_EXCEEDED: 4,
  RESOURCE_EXHAUSTED: 8,
  INTERNAL: 13,
  UNAVAILABLE: 14,
} as const;

/** One method as @grpc/proto-loader describes it. */
export interface UnaryMethod {
  path: string;
  requestSerialize(value: object): Buffer;
  responseDeserialize(bytes: Buffer): unknown;
}

export class GrpcCallError extends Error {
  constructor(
    readonly code: number,
    readonly details: string,
  ) {
    super(`gRPC status ${code}: ${details}`);
    this.name = 'GrpcCallError';
  }
}

export interface ChannelTarget {
  network: string;
  address: string;
  /** mTLS material; null for a plaintext plugin (no server certificate in the handshake). */
  tls: { ca: string; key: string; cert: string } | null;
  maxMessageBytes: number;
}

const PREFIX_BYTES = 5;

export class GrpcUnaryChannel {
  private inFlight = 0;

  private constructor(
    private readonly session: http2.ClientHttp2Session,
    private readonly maxMessageBytes: number,
  ) {}

  /** Connects and completes the HTTP/2 (and TLS) handshake within `timeoutMs`. */
  static connect(target: ChannelTarget, timeoutMs: number): Promise<GrpcUnaryChannel> {
    const where: net.NetConnectOpts =
      target.network === 'unix' ? { path: target.address } : hostPort(target.address);
    const secure = target.tls;
    const session = http2.connect(secure ? 'https://localhost' : 'http://localhost', {
      createConnection: () =>
        secure
          ? // The plugin's certificate is issued to "localhost" whatever the socket.
            tls.connect({ ...where, ...secure, servername: 'localhost', ALPNProtocols: ['h2'] })
          : net.connect(where),
      // A GetSchema answer is megabytes (4.7 MiB for AWS): no session memory cap, a wide window.
      maxSessionMemory: Number.MAX_SAFE_INTEGER,
      settings: { initialWindowSize: 4 * 1024 * 1024 },
    });
    // Errors reach the calls through their streams; this only keeps them from being thrown.
    session.on('error', () => undefined);
    return new Promise((resolve, reject) => {
      const fail = (err: Error) => {
        clearTimeout(timer);
        session.destroy();
        reject(err);
      };
      const timer = setTimeout(
        () => fail(new Error(`no HTTP/2 connection within ${timeoutMs} ms`)),
        timeoutMs,
      );
      session.once('error', fail);
      session.once('close', () => fail(new Error('the connection closed')));
      session.once('connect', () => {
        clearTimeout(timer);
        session.removeListener('error', fail);
        session.removeAllListeners('close');
        session.unref();
        resolve(new GrpcUnaryChannel(session, target.maxMessageBytes));
      });
    });
  }

  /** One call; rejects with a GrpcCallError carrying the status (UNAVAILABLE when the connection is gone). */
  unary(method: UnaryMethod, request: object, timeoutMs: number): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const message = method.requestSerialize(request);
      const frame = Buffer.allocUnsafe(PREFIX_BYTES + message.length);
      frame[0] = 0;
      frame.writeUInt32BE(message.length, 1);
      message.copy(frame, PREFIX_BYTES);
      let stream: http2.ClientHttp2Stream;
      try {
        const headers = {
          ':method': 'POST',
          ':path': method.path,
          'content-type': 'application/grpc',
          te: 'trailers',
          'grpc-timeout': `${Math.max(1, Math.ceil(timeoutMs))}m`,
        };
        stream = withPlainBind(() => this.session.request(headers));
      } catch (e) {
        reject(new GrpcCallError(GrpcStatus.UNAVAILABLE, (e as Error).message));
        return;
      }
      this.track(1);
      const chunks: Buffer[] = [];
      let received = 0;
      let httpStatus = 0;
      let status: number | undefined;
      let details = '';
      let failure: GrpcCallError | undefined;
      let streamError: Error | undefined;
      const takeStatus = (headers: http2.IncomingHttpHeaders) => {
        const code = headers['grpc-status'];
        if (code === undefined) return;
        status = Number(code);
        details = percentDecode(String(headers['grpc-message'] ?? ''));
      };
      const deadline = performance.now() + timeoutMs;
      const timer = setTimeout(() => {
        failure = new GrpcCallError(GrpcStatus.DEADLINE_EXCEEDED, 'Deadline exceeded');
        stream.close(http2.constants.NGHTTP2_CANCEL);
      }, timeoutMs);
      stream.on('response', (headers) => {
        httpStatus = Number(headers[':status']);
        takeStatus(headers); // a trailers-only answer carries its status here
      });
      stream.on('trailers', takeStatus);
      stream.on('data', (chunk: Buffer) => {
        received += chunk.length;
        if (received > this.maxMessageBytes + PREFIX_BYTES && !failure) {
          failure = new GrpcCallError(
            GrpcStatus.RESOURCE_EXHAUSTED,
            `response larger than ${this.maxMessageBytes} bytes`,
          );
          stream.close(http2.constants.NGHTTP2_CANCEL);
          return;
        }
        chunks.push(chunk);
      });
      stream.on('error', (e) => (streamError = e));
      stream.on('close', () => {
        clearTimeout(timer);
        this.track(-1);
        if (failure) return reject(failure);
        if (status === undefined) {
          // A provider past the deadline may reset the stream rather than answer.
          if (performance.now() >= deadline) {
            return reject(new GrpcCallError(GrpcStatus.DEADLINE_EXCEEDED, 'Deadline exceeded'));
          }
          const why =
            httpStatus && httpStatus !== 200
              ? `HTTP status ${httpStatus}`
              : `stream closed without a status${streamError ? `: ${streamError.message}` : ''}`;
          return reject(
            new GrpcCallError(
              httpStatus && httpStatus !== 200 ? GrpcStatus.UNKNOWN : GrpcStatus.UNAVAILABLE,
              why,
            ),
          );
        }
        if (status !== GrpcStatus.OK) {
          // The provider holds the same deadline (grpc-timeout): once it has
          // passed, its failure is the deadline's, whatever status it chose
          // (a Go provider often answers "context deadline exceeded" as
          // UNKNOWN) and whichever of its answer and our timer came first.
          if (performance.now() >= deadline && status !== GrpcStatus.DEADLINE_EXCEEDED) {
            return reject(
              new GrpcCallError(GrpcStatus.DEADLINE_EXCEEDED, `Deadline exceeded (${details})`),
            );
          }
          return reject(new GrpcCallError(status, details));
        }
        const body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, received);
        const length = body.length >= PREFIX_BYTES ? body.readUInt32BE(1) : -1;
        if (length < 0 || body[0] !== 0 || length !== body.length - PREFIX_BYTES) {
          return reject(
            new GrpcCallError(
              GrpcStatus.INTERNAL,
              body.length >= PREFIX_BYTES && body[0] !== 0
                ? 'compressed response (none was offered)'
                : 'not exactly one response message',
            ),
          );
        }
        try {
          resolve(method.responseDeserialize(body.subarray(PREFIX_BYTES)));
        } catch (e) {
          reject(new GrpcCallError(GrpcStatus.INTERNAL, `bad response: ${(e as Error).message}`));
        }
      });
      stream.end(frame);
    });
  }

  close(): void {
    if (!this.session.destroyed) this.session.destroy();
  }

  /** Keeps the process alive while a call is in flight, and only then. */
  private track(delta: number): void {
    this.inFlight += delta;
    if (this.session.destroyed) return;
    if (delta > 0 && this.inFlight === 1) this.session.ref();
    if (delta < 0 && this.inFlight === 0) this.session.unref();
  }
}

type Bind = (
  this: AsyncResource,
  fn: (...args: unknown[]) => unknown,
  thisArg?: unknown,
) => unknown;

/**
 * `AsyncResource#bind` as Node defines it, less the deprecated `asyncResource`
 * accessor (DEP0172) on the bound function.
 */
const plainBind: Bind = function (fn, thisArg) {
  if (thisArg !== undefined) return this.runInAsyncScope.bind(this, fn, thisArg);
  // eslint-disable-next-line @typescript-eslint/no-this-alias
  const resource = this;
  return function (this: unknown, ...args: unknown[]) {
    return resource.runInAsyncScope(fn, this, ...args);
  };
};

const nodeBind = AsyncResource.prototype.bind as unknown as Bind;

/** Whether this Node's `bind` gives bound functions the deprecated accessor (Node 20 does). */
const bindAddsAccessor =
  Object.getOwnPropertyDescriptor(
    new AsyncResource('GrpcUnaryChannelProbe').bind(() => undefined),
    'asyncResource',
  ) !== undefined;

/**
 * Runs `fn` (a synchronous `session.request`) with `plainBind` as
 * `AsyncResource#bind`. Node 20's http2 `request()` binds every new stream's
 * connect callback with it, and the accessor it adds is two `util.deprecate`
 * wrappers, each given a new prototype with `Object.setPrototypeOf`: per
 * ReadResource call that cost kl far more CPU than the call's own work
 * (docs/performance-history.md, "Refresh (wave 10)"). Nothing reads the accessor
 * (Node only calls the bound function), and the swap lasts only while
 * `request()` runs, so no other code in the process sees it.
 */
function withPlainBind<T>(fn: () => T): T {
  if (!bindAddsAccessor) return fn();
  const proto = AsyncResource.prototype as unknown as { bind: Bind };
  proto.bind = plainBind;
  try {
    return fn();
  } finally {
    proto.bind = nodeBind;
  }
}

function hostPort(address: string): net.NetConnectOpts {
  const colon = address.lastIndexOf(':');
  const host = address.slice(0, colon).replace(/^\[(.*)\]$/, '$1');
  return { host, port: Number(address.slice(colon + 1)) };
}

function percentDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
