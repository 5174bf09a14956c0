import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { KilolockClient } from '../../src/cli/kilolock-client';
import type { EventsQuery } from '../../src/cli/kilolock-client';
import { ROOT } from './kld-process';

/** Call metadata carrying a token, as a consumer sends it. */
export function bearer(token: string): grpc.Metadata {
  const metadata = new grpc.Metadata();
  metadata.set('authorization', `Bearer ${token}`);
  return metadata;
}

/** A message of the gRPC feed, flattened: which kind, and its fields. */
export interface GrpcMessage {
  kind: 'event' | 'caught_up' | 'checkpoint' | 'batch';
  /** A batch's: its last event's. */
  position: string;
  event?: Record<string, string | number>;
  /** A batch's events (max_batch > 1). */
  events?: Record<string, string | number>[];
}

type EventsClient = grpc.Client & {
  Subscribe(
    request: object,
    metadata?: grpc.Metadata,
  ): grpc.ClientReadableStream<Record<string, unknown>>;
  Read(
    request: object,
    metadata?: grpc.Metadata,
  ): grpc.ClientReadableStream<Record<string, unknown>>;
};

/**
 * A client of kilolock.v1.Events, loaded from the repository's proto as a
 * consumer would; plaintext unless given TLS credentials.
 */
export function grpcEventsClient(
  address: string,
  credentials: grpc.ChannelCredentials = grpc.credentials.createInsecure(),
  options: grpc.ChannelOptions = {},
): EventsClient {
  const dir = path.join(ROOT, 'proto');
  const definition = protoLoader.loadSync(path.join(dir, 'kilolock/v1/events.proto'), {
    includeDirs: [dir],
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  const v1 = (grpc.loadPackageDefinition(definition).kilolock as grpc.GrpcObject)
    .v1 as grpc.GrpcObject;
  const Events = v1.Events as grpc.ServiceClientConstructor;
  return new Events(address, credentials, options) as unknown as EventsClient;
}

export function flatten(message: Record<string, unknown>): GrpcMessage {
  const kind = message.kind as GrpcMessage['kind'];
  if (kind === 'batch') {
    const { events } = message.batch as { events: Record<string, string | number>[] };
    return { kind, position: String(events.at(-1)?.position), events };
  }
  const body = message[kind] as Record<string, string | number>;
  return { kind, position: String(body.position), ...(kind === 'event' ? { event: body } : {}) };
}

/** Batched messages as the one-event messages the same feed sends without max_batch. */
export function unbatched(messages: GrpcMessage[]): GrpcMessage[] {
  return messages.flatMap((m) =>
    m.kind === 'batch'
      ? m.events!.map((event) => ({
          kind: 'event' as const,
          position: String(event.position),
          event,
        }))
      : [m],
  );
}

/**
 * Reads a gRPC stream into `messages` until `until` says stop (then cancels)
 * or the server ends it; rejects with the gRPC error otherwise.
 */
export function collectGrpc(
  call: grpc.ClientReadableStream<Record<string, unknown>>,
  until: (messages: GrpcMessage[]) => boolean = () => false,
): { messages: GrpcMessage[]; done: Promise<void>; stop(): Promise<void> } {
  const messages: GrpcMessage[] = [];
  let cancelled = false;
  const done = new Promise<void>((resolve, reject) => {
    call.on('data', (m: Record<string, unknown>) => {
      messages.push(flatten(m));
      if (!cancelled && until(messages)) {
        cancelled = true;
        call.cancel();
        resolve();
      }
    });
    call.on('end', () => resolve());
    call.on('error', (err: grpc.ServiceError) => {
      if (cancelled && err.code === grpc.status.CANCELLED) return resolve();
      reject(err);
    });
  });
  const stop = () => {
    cancelled = true;
    call.cancel();
    return done;
  };
  return { messages, done, stop };
}

/** An SSE message of `GET /v1/events`: its id, event name (none for events) and data. */
export interface SseMessage {
  id?: string;
  event?: string;
  data: string;
}

/** Reads kld's SSE feed with kl's own client until `until` says stop or the stream ends. */
export function collectSse(
  server: string,
  query: EventsQuery,
  until: (messages: SseMessage[]) => boolean = () => false,
): { messages: SseMessage[]; done: Promise<void>; stop(): Promise<void> } {
  const messages: SseMessage[] = [];
  const abort = new AbortController();
  const done = (async () => {
    for await (const m of new KilolockClient(server).events(query, abort.signal)) {
      messages.push({ id: m.id, event: m.event, data: m.data });
      if (until(messages)) {
        abort.abort();
        return;
      }
    }
  })();
  const stop = () => {
    abort.abort();
    return done;
  };
  return { messages, done, stop };
}
