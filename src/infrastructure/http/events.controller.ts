import { once } from 'node:events';
import { Controller, Get, Inject, OnModuleDestroy, Query, Req, Res } from '@nestjs/common';
import type { Request, Response } from 'express';
import { EVENT_FEED, EventFeed } from '../../application/events/event-feed';
import { eventAccess, EventFilter } from '../../application/events/event-filter';
import { parseCursor } from '../../domain/shared/log-cursor';
import { AUTHENTICATOR, type Authenticator } from '../auth/authenticator';
import { SubscriberRecheck } from '../auth/subscriber-recheck';
import { LOGGER, type Logger } from '../logging/logger';
import { DomainError } from '../../domain/shared/domain-error';
import { Access, AUTH_UNAUTHENTICATED, principalOf } from './access';
import { EventsQueryDto } from './dto/events.dto';
import { Heavy } from './caller-bounds';
import { sseFrame } from './sse-frames';

const HEARTBEAT_S = 15;
/**
 * Events the feed hands over at once: their frames go out in one write. As
 * many as the feed's slice (EVENTS_PER_TURN in event-feed.ts): framed in the
 * slice's turn of kld's loop, not five slices' worth in one.
 */
const FRAMES_PER_WRITE = 100;

/**
 * `GET /v1/events`: the event log as Server-Sent Events, for consumers
 * without gRPC. Each event is a `message` whose `id:` is its position, so an
 * EventSource that reconnects resumes after the last one it got
 * (Last-Event-ID); `caught-up` and `checkpoint` events carry a position too.
 * Comment lines keep idle connections (and proxies) alive.
 */
@Controller('v1/events')
export class EventsController implements OnModuleDestroy {
  private readonly shutdown = new AbortController();

  constructor(
    @Inject(EVENT_FEED) private readonly feed: EventFeed,
    @Inject(LOGGER) private readonly logger: Logger,
    @Inject(AUTHENTICATOR) private readonly authenticator: Authenticator | null,
  ) {}

  onModuleDestroy(): void {
    this.shutdown.abort();
  }

  // The events scope lets a token subscribe; what it gets is the events of
  // the states it may read (docs/security.md).
  @Get()
  @Access.events()
  @Heavy('subscription')
  async stream(
    @Query() query: EventsQueryDto,
    @Req() req: Request,
    @Res() res: Response,
  ): Promise<void> {
    const from = query.from ?? req.header('last-event-id') ?? null;
    const follow = query.follow ?? true;
    const limit = query.limit ?? null;
    const checkpointMs = query.checkpoint_ms ?? null;
    const heartbeatS = query.heartbeat ?? HEARTBEAT_S;
    const filter = EventFilter.compile(
      { states: query.state, streamPrefixes: query.stream, types: query.type },
      eventAccess(principalOf(req).grants),
    );
    const abort = new AbortController();
    const stop = () => abort.abort();
    this.shutdown.signal.addEventListener('abort', stop, { once: true });
    res.on('close', stop);
    try {
      // Refusals happen here, before the 200: the error filter answers them.
      const items = await this.feed.open(
        {
          from: from === null || from === '' ? 'start' : from === 'end' ? 'end' : parseCursor(from),
          filter,
          follow,
          batch: FRAMES_PER_WRITE,
          ...(limit !== null ? { limit } : {}),
          ...(checkpointMs !== null ? { checkpointEveryMs: checkpointMs } : {}),
        },
        abort.signal,
      );
      res.writeHead(200, {
        'Content-Type': 'text/event-stream; charset=utf-8',
        'Cache-Control': 'no-store',
        'X-Accel-Buffering': 'no',
      });
      // HEAD (Express routes it here) gets the headers and its end (the feed
      // reads nothing until iterated): its client reads no body, and a
      // request it sends next on the connection would wait behind this one.
      if (req.method === 'HEAD') {
        res.end();
        return;
      }
      res.flushHeaders();
      const heartbeat = setInterval(() => res.write(': heartbeat\n\n'), heartbeatS * 1000);
      // A token revoked or expired while the stream is open ends it too.
      const authenticator = this.authenticator;
      const recheck = authenticator
        ? new SubscriberRecheck(() => authenticator.authenticate(req))
        : null;
      try {
        for await (const item of items) {
          if (abort.signal.aborted) break;
          await recheck?.beforeSend();
          if (!res.write(sseFrame(item))) {
            await once(res, 'drain', { signal: abort.signal }).catch(() => undefined);
          }
        }
      } catch (err) {
        // Too late for a status: say so in the stream, then end it.
        if (err instanceof DomainError && err.code === AUTH_UNAUTHENTICATED) {
          res.write(`event: error\ndata: ${JSON.stringify(err.toJSON())}\n\n`);
          res.end();
          return;
        }
        this.logger.warn({ err }, 'event stream failed');
        res.write(
          `event: error\ndata: ${JSON.stringify({ code: 'SERVER.UNAVAILABLE', message: 'the event log cannot be read now; reconnect to resume' })}\n\n`,
        );
      } finally {
        clearInterval(heartbeat);
      }
      res.end();
    } finally {
      this.shutdown.signal.removeEventListener('abort', stop);
    }
  }
}
