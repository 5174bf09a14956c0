import { X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import * as net from 'node:net';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { EventFeed, FeedRequest } from '../../application/events/event-feed';
import { eventAccess, EventFilter } from '../../application/events/event-filter';
import { DomainError } from '../../domain/shared/domain-error';
import { formatCursor, parseCursor } from '../../domain/shared/log-cursor';
import { type Authenticator, OPEN, subjectText } from '../auth/authenticator';
import { SubscriberRecheck } from '../auth/subscriber-recheck';
import { AUTH_FORBIDDEN, AUTH_UNAUTHENTICATED, requirePrincipalScope } from '../http/access';
import { acquireHeavy, boundCaller, type CallerBounds } from '../http/caller-bounds';
import { ConnectionBudget } from '../http/connection-bound';
import { DEFAULT_IDLE_MS } from '../http/connection-drain';
import type { Logger } from '../logging/logger';
import type { OversizedEvent } from './event-message-encoding';
import {
  type CallMessages,
  DEFAULT_MAX_MESSAGE_BYTES,
  feedBatch,
  feedMessages,
} from './feed-messages';
import { protoDir } from '../provider/plugin-protos';

interface StartFields {
  start?: 'from' | 'origin';
  from?: string;
  origin?: 'ORIGIN_UNSPECIFIED' | 'ORIGIN_START' | 'ORIGIN_END';
  filter?: { states?: string[]; stream_prefixes?: string[]; types?: string[] } | null;
  max_batch?: number;
  max_message_bytes?: number;
}
type SubscribeRequest = StartFields & { checkpoint_interval_ms?: number };
type ReadRequest = StartFields & { limit?: number };

const MIN_CHECKPOINT_MS = 100;
/**
 * Calls open at once on one connection (HTTP/2 SETTINGS; a client queues
 * the rest). grpc-js sets none: 2,000 streams on one connection cost 34 MB.
 * A consumer needs a few, and one caller gets at most KL_CALLER_SUBSCRIPTIONS
 * anyway; room is left for a proxy that carries several callers' streams.
 */
export const MAX_STREAMS_PER_CONNECTION = 100;
/** Most events a batch may hold (max_batch). */
export const MAX_BATCH = 1000;
/** The trailing metadata key that names the event a call could not send. */
export const OVERSIZED_POSITION_KEY = 'kl-oversized-position';
const EVENTS_TOO_LARGE = 'EVENTS.TOO_LARGE';

/** The service definition of kilolock.v1.Events, loaded once. */
export function eventsServiceDefinition(): grpc.ServiceDefinition {
  const dir = protoDir();
  const definition = protoLoader.loadSync(path.join(dir, 'kilolock/v1/events.proto'), {
    includeDirs: [dir],
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  const pkg = grpc.loadPackageDefinition(definition).kilolock as grpc.GrpcObject;
  const v1 = pkg.v1 as grpc.GrpcObject;
  const service = (v1.Events as grpc.ServiceClientConstructor).service;
  // Events and batches go out already encoded (feedMessages); markers as
  // objects, through protobufjs.
  const passEncoded = (method: grpc.MethodDefinition<unknown, unknown>) => ({
    ...method,
    responseSerialize: (value: unknown) =>
      Buffer.isBuffer(value) ? value : method.responseSerialize(value),
  });
  return Object.fromEntries(
    Object.entries(service).map(([name, method]) => [name, passEncoded(method)]),
  );
}

/** PEM contents for serving TLS; `clientCa` requires client certificates signed by it. */
export interface GrpcTls {
  cert: Buffer;
  key: Buffer;
  clientCa: Buffer | null;
}

/**
 * kilolock.v1.Events over gRPC (KL_GRPC_LISTEN): the same feed SSE serves,
 * to the same callers: with authentication on, a call carries its token in
 * the `authorization` metadata (or comes over mTLS with a certificate that
 * names an identity), needs the `events` scope, and gets only the events of
 * states it may read. A refused request ends with UNAUTHENTICATED,
 * PERMISSION_DENIED or INVALID_ARGUMENT before any message; a consumer
 * slower than the writers is slowed by the transport's flow control, and the
 * feed behind it falls back to reading the log.
 */
export class EventsGrpcServer {
  private server: grpc.Server | null = null;
  private listener: net.Server | null = null;
  private readonly calls = new Set<AbortController>();

  constructor(
    private readonly feed: EventFeed,
    private readonly logger: Logger,
    /** null: authentication is off, every call may read everything. */
    private readonly authenticator: Authenticator | null = null,
    private readonly tls: GrpcTls | null = null,
    /** The per-caller bounds HTTP counts with: a stream is one of its caller's subscriptions. */
    private readonly bounds: CallerBounds | null = null,
    /**
     * A connection with no call for this long is closed (GOAWAY; a client
     * reconnects when it next calls). grpc-js keeps one forever by default,
     * and turns off Node's socket timeout too: idle connections would pile
     * up without bound. As long as kld's HTTP keep-alive (KL_HTTP_IDLE_TIMEOUT);
     * up to twice that in fact, since grpc-js compares the wall clock with its
     * timer's and re-arms a whole bound when the timer fires a millisecond early.
     */
    private readonly idleMs = DEFAULT_IDLE_MS,
    /** The connections kld holds, HTTP's and these together. */
    private readonly budget = new ConnectionBudget(),
  ) {}

  /** Listens on host:port (port 0: any free one); returns the address bound. */
  async listen(host: string, port: number): Promise<string> {
    const server = new grpc.Server({
      'grpc.max_connection_idle_ms': this.idleMs,
      'grpc.max_concurrent_streams': MAX_STREAMS_PER_CONNECTION,
    });
    server.addService(eventsServiceDefinition(), {
      Subscribe: (call: grpc.ServerWritableStream<SubscribeRequest, unknown>) =>
        void this.serve(call, (r) => subscribeRequest(r)),
      Read: (call: grpc.ServerWritableStream<ReadRequest, unknown>) =>
        void this.serve(call, (r) => readRequest(r)),
    });
    // kld accepts the connections itself, to count them (grpc-js cannot),
    // and hands each it holds to grpc-js, which speaks TLS and HTTP/2 on it.
    const injector = server.createConnectionInjector(this.credentials());
    const listener = net.createServer((socket) => {
      if (!this.budget.admitGrpc(socket)) {
        socket.destroy();
        return;
      }
      injector.injectConnection(socket);
    });
    const bindHost = host.includes(':') ? `[${host}]` : host;
    listener.listen(port, host);
    await Promise.race([
      once(listener, 'listening'),
      once(listener, 'error').then(([err]) => Promise.reject(err as Error)),
    ]);
    this.server = server;
    this.listener = listener;
    return `${bindHost}:${(listener.address() as net.AddressInfo).port}`;
  }

  private credentials(): grpc.ServerCredentials {
    if (this.tls === null) return grpc.ServerCredentials.createInsecure();
    const { cert, key, clientCa } = this.tls;
    return grpc.ServerCredentials.createSsl(
      clientCa,
      [{ cert_chain: cert, private_key: key }],
      clientCa !== null,
    );
  }

  /** Ends every subscription, then stops listening. */
  async close(): Promise<void> {
    for (const c of this.calls) c.abort();
    const server = this.server;
    this.server = null;
    this.listener?.close();
    this.listener = null;
    if (!server) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        server.forceShutdown();
        resolve();
      }, 2000);
      server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  private async serve<R extends StartFields>(
    call: grpc.ServerWritableStream<R, unknown>,
    parse: (request: R) => Omit<FeedRequest, 'filter'>,
  ): Promise<void> {
    const abort = new AbortController();
    this.calls.add(abort);
    call.on('cancelled', () => abort.abort());
    call.on('close', () => abort.abort());
    let release: (() => void) | null = null;
    try {
      const authenticator = this.authenticator;
      const authenticate = () =>
        authenticator
          ? authenticator.authenticateWith(authorizationOf(call.metadata), () =>
              certificateSubject(call),
            )
          : Promise.resolve(OPEN);
      const principal = await authenticate();
      // A token revoked or expired while the stream is open ends it too.
      const recheck = authenticator ? new SubscriberRecheck(authenticate) : null;
      requirePrincipalScope(
        principal,
        'events',
        `kilolock.v1.Events/${call.getPath().split('/').pop()}`,
      );
      if (this.bounds) {
        const caller = boundCaller(principal, peerAddress(call.getPeer()), () => 'anonymous');
        release = acquireHeavy(this.bounds, 'subscription', caller);
      }
      const request = call.request;
      const take: CallMessages = {
        maxBatch: batchOf(request),
        maxBytes: maxMessageBytesOf(request),
      };
      const filter = EventFilter.compile(
        {
          states: request.filter?.states,
          streamPrefixes: request.filter?.stream_prefixes,
          types: request.filter?.types,
        },
        eventAccess(principal.grants),
      );
      const feed = await this.feed.open(
        { ...parse(request), filter, batch: feedBatch(take) },
        abort.signal,
      );
      for await (const item of feed) {
        await recheck?.beforeSend();
        const { out, oversized } = feedMessages(item, take);
        for (const m of out) {
          if (abort.signal.aborted) break;
          if (!call.write(m)) {
            // Flow control: wait for the client to take more (or to leave).
            await once(call, 'drain', { signal: abort.signal }).catch(() => undefined);
          }
        }
        if (abort.signal.aborted) break;
        if (oversized !== null) {
          call.emit('error', tooLarge(oversized, take.maxBytes));
          return;
        }
      }
      if (!abort.signal.aborted) call.end();
    } catch (err) {
      if (abort.signal.aborted) return;
      call.emit('error', this.status(err));
    } finally {
      release?.();
      this.calls.delete(abort);
    }
  }

  private status(err: unknown): Partial<grpc.StatusObject> {
    if (err instanceof DomainError && err.code === AUTH_UNAUTHENTICATED) {
      return { code: grpc.status.UNAUTHENTICATED, details: `${err.code}: ${err.message}` };
    }
    if (err instanceof DomainError && err.code === AUTH_FORBIDDEN) {
      return { code: grpc.status.PERMISSION_DENIED, details: `${err.code}: ${err.message}` };
    }
    if (err instanceof DomainError && err.code === 'REQUEST.TOO_MANY') {
      return { code: grpc.status.RESOURCE_EXHAUSTED, details: `${err.code}: ${err.message}` };
    }
    if (err instanceof DomainError) {
      const invalid = err.code.startsWith('EVENTS.') || err.code === 'REQUEST.INVALID';
      return {
        code: invalid ? grpc.status.INVALID_ARGUMENT : grpc.status.FAILED_PRECONDITION,
        details: `${err.code}: ${err.message}`,
      };
    }
    this.logger.warn({ err }, 'event subscription failed');
    return {
      code: grpc.status.UNAVAILABLE,
      details: 'the event log cannot be read now; resume from your last position',
    };
  }
}

function startOf(request: StartFields): FeedRequest['from'] {
  if (request.start === 'from') {
    if (!request.from) throw invalid('from is empty: give a position, or an origin');
    return parseCursor(request.from);
  }
  return request.origin === 'ORIGIN_END' ? 'end' : 'start';
}

function batchOf(request: StartFields): number {
  const n = request.max_batch ?? 0;
  if (n > MAX_BATCH) throw invalid(`max_batch is at most ${MAX_BATCH} (0 or 1: no batches)`);
  return Math.max(1, n);
}

function subscribeRequest(request: SubscribeRequest): Omit<FeedRequest, 'filter'> {
  const ms = request.checkpoint_interval_ms ?? 0;
  if (ms !== 0 && ms < MIN_CHECKPOINT_MS) {
    throw invalid(`checkpoint_interval_ms is at least ${MIN_CHECKPOINT_MS} (0 for the default)`);
  }
  return {
    from: startOf(request),
    follow: true,
    ...(ms ? { checkpointEveryMs: ms } : {}),
  };
}

function readRequest(request: ReadRequest): Omit<FeedRequest, 'filter'> {
  return {
    from: startOf(request),
    follow: false,
    ...(request.limit ? { limit: request.limit } : {}),
  };
}

function maxMessageBytesOf(request: StartFields): number {
  const n = request.max_message_bytes ?? 0;
  if (n === 0) return DEFAULT_MAX_MESSAGE_BYTES;
  if (n < DEFAULT_MAX_MESSAGE_BYTES) {
    throw invalid(
      `max_message_bytes is at least ${DEFAULT_MAX_MESSAGE_BYTES} (0 for that default): a batch takes up to about 3 MiB`,
    );
  }
  return n;
}

/**
 * The end of a call at an event too big for its client: every event before
 * it was sent; the status names it, so the client can raise its limit or
 * resume from it (which passes over it).
 */
function tooLarge({ event, bytes }: OversizedEvent, maxBytes: number): Partial<grpc.StatusObject> {
  const position = formatCursor(event.position);
  const metadata = new grpc.Metadata();
  metadata.set(OVERSIZED_POSITION_KEY, position);
  return {
    code: grpc.status.FAILED_PRECONDITION,
    details:
      `${EVENTS_TOO_LARGE}: the event at position ${position} (${event.type} of ${event.streamId}) ` +
      `needs a message of ${bytes} bytes, more than this call's max_message_bytes (${maxBytes}; ` +
      `0 is gRPC's default receive limit, ${DEFAULT_MAX_MESSAGE_BYTES}): raise the client's ` +
      `grpc.max_receive_message_length and max_message_bytes to get it, or resume from ` +
      `${position} to pass over it`,
    metadata,
  };
}

function invalid(message: string): DomainError {
  return new DomainError('REQUEST.INVALID', message);
}

/** A peer's address without its port (`1.2.3.4:5678`, `[::1]:5678`). */
function peerAddress(peer: string): string {
  return peer.replace(/:\d+$/, '').replace(/^\[(.*)\]$/, '$1');
}

/** The `authorization` metadata, as HTTP's Authorization header (given once). */
function authorizationOf(metadata: grpc.Metadata): string | undefined {
  const values = metadata.get('authorization');
  if (values.length > 1) {
    throw new DomainError(AUTH_UNAUTHENTICATED, 'send the authorization metadata once');
  }
  return values.length === 1 ? String(values[0]) : undefined;
}

/** The verified client certificate's subject (mTLS), as HTTP names it; null without one. */
function certificateSubject(call: {
  getAuthContext(): { sslPeerCertificate?: { raw?: Buffer } };
}): string | null {
  const raw = call.getAuthContext().sslPeerCertificate?.raw;
  return raw ? subjectText(new X509Certificate(raw).subject) : null;
}
