import {
  Inject,
  Injectable,
  Module,
  OnApplicationBootstrap,
  OnApplicationShutdown,
  OnModuleDestroy,
} from '@nestjs/common';
import * as fs from 'node:fs';
import { EVENT_FEED, EventFeed } from '../application/events/event-feed';
import { BULK_EVENT_STORE, EVENT_STORE, EventStore } from '../application/ports/event-store.port';
import { AUTHENTICATOR, type Authenticator } from '../infrastructure/auth/authenticator';
import { CONFIG, type Config } from '../infrastructure/config/config';
import { ConnectionBudget } from '../infrastructure/http/connection-bound';
import { EventsGrpcServer, GrpcTls } from '../infrastructure/grpc/events-grpc.server';
import { EventsController } from '../infrastructure/http/events.controller';
import { CallerBounds } from '../infrastructure/http/caller-bounds';
import { FeedSubscribers, subscriberLag } from '../infrastructure/metrics/feed-subscribers';
import { METRICS, PrometheusMetrics } from '../infrastructure/metrics/prometheus-metrics';
import { DATABASE, Database } from '../infrastructure/postgres/database';
import { LOGGER, type Logger } from '../infrastructure/logging/logger';
import { AuthenticationModule } from './authentication.module';
import { EventStoreModule } from './event-store.module';

/** The gRPC service's lifetime: listening once Nest is up, closed before the feed. */
@Injectable()
export class EventsGrpcLifecycle implements OnApplicationBootstrap, OnModuleDestroy {
  /** host:port bound, once listening; null when KL_GRPC_LISTEN is off. */
  address: string | null = null;

  constructor(
    private readonly server: EventsGrpcServer,
    @Inject(CONFIG) private readonly config: Config,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    const listen = this.config.grpcListen;
    if (!listen) return;
    try {
      this.address = await this.server.listen(listen.host, listen.port);
    } catch (err) {
      throw new Error(
        `cannot listen for gRPC on ${listen.host}:${listen.port} (KL_GRPC_LISTEN; off to disable): ${(err as Error).message}`,
      );
    }
    this.logger.info(
      {
        grpc: this.address,
        tls: this.config.tls ? 'on' : 'off',
        auth: this.config.auth.enabled ? 'on' : 'off',
      },
      'kld gRPC events listening',
    );
  }

  onModuleDestroy(): Promise<void> {
    return this.server.close();
  }
}

/** The one EventFeed of the process; each transport reads it through FeedSubscribers.meter. */
const FEED = Symbol('EventFeed (unmetered)');

/** `/metrics` reads the subscribers' count and lag at each scrape. */
class SubscriberMetrics {
  constructor(subscribers: FeedSubscribers, db: Database, metrics: PrometheusMetrics) {
    metrics.watchSubscribers(() => subscriberLag(db, subscribers));
  }
}

/** Ends the live tail last, once no transport reads the feed. */
class EventFeedLifecycle implements OnApplicationShutdown {
  constructor(private readonly feed: EventFeed) {}
  onApplicationShutdown(): Promise<void> {
    return this.feed.close();
  }
}

/** KL_TLS_*: gRPC serves TLS (and requires client certificates) exactly as HTTPS does. */
function grpcTls(config: Config): GrpcTls | null {
  if (config.tls === null) return null;
  const { certFile, keyFile, clientCaFile } = config.tls;
  // kld read these at start already (server.ts): a missing one stopped it there.
  return {
    cert: fs.readFileSync(certFile),
    key: fs.readFileSync(keyFile),
    clientCa: clientCaFile === null ? null : fs.readFileSync(clientCaFile),
  };
}

/**
 * The event log for audit and integration consumers: `GET /v1/events` (SSE)
 * and kilolock.v1.Events over gRPC, both reading one EventFeed.
 */
@Module({
  imports: [EventStoreModule, AuthenticationModule],
  controllers: [EventsController],
  providers: [
    { provide: FeedSubscribers, useFactory: () => new FeedSubscribers() },
    {
      provide: FEED,
      useFactory: (store: EventStore, bulk: EventStore, logger: Logger) =>
        new EventFeed(store, {
          catchUp: bulk,
          onFallBehind: (position) =>
            logger.debug(
              { position: position.globalPosition.toString() },
              'a live event consumer fell behind; it reads the log until it catches up',
            ),
        }),
      inject: [EVENT_STORE, BULK_EVENT_STORE, LOGGER],
    },
    // What the SSE controller reads: the one feed, its subscriptions counted as `sse`.
    {
      provide: EVENT_FEED,
      useFactory: (feed: EventFeed, subscribers: FeedSubscribers) => subscribers.meter(feed, 'sse'),
      inject: [FEED, FeedSubscribers],
    },
    {
      provide: EventFeedLifecycle,
      useFactory: (feed: EventFeed) => new EventFeedLifecycle(feed),
      inject: [FEED],
    },
    {
      provide: SubscriberMetrics,
      useFactory: (subscribers: FeedSubscribers, db: Database, metrics: PrometheusMetrics) =>
        new SubscriberMetrics(subscribers, db, metrics),
      inject: [FeedSubscribers, DATABASE, METRICS],
    },
    {
      provide: EventsGrpcServer,
      useFactory: (
        feed: EventFeed,
        subscribers: FeedSubscribers,
        logger: Logger,
        authenticator: Authenticator | null,
        config: Config,
        bounds: CallerBounds,
        budget: ConnectionBudget,
      ) =>
        new EventsGrpcServer(
          subscribers.meter(feed, 'grpc'),
          logger,
          authenticator,
          grpcTls(config),
          bounds,
          config.idleMs,
          budget,
        ),
      inject: [
        FEED,
        FeedSubscribers,
        LOGGER,
        AUTHENTICATOR,
        CONFIG,
        CallerBounds,
        ConnectionBudget,
      ],
    },
    // The HTTP server counts against it too (server.ts).
    { provide: ConnectionBudget, useFactory: () => new ConnectionBudget() },
    EventsGrpcLifecycle,
  ],
})
export class EventsModule {}
