import { once } from 'node:events';
import * as http2 from 'node:http2';
import * as net from 'node:net';
import pino from 'pino';
import type { EventFeed } from '../../application/events/event-feed';
import { EventsGrpcServer, MAX_STREAMS_PER_CONNECTION } from './events-grpc.server';

/** A connection to `port` that sends `bytes` and reads what comes; resolves when closed. */
function closedAfterSending(port: number, bytes: string): Promise<void> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => {
      if (bytes) socket.write(bytes);
    });
    socket.on('error', () => undefined);
    socket.resume(); // reads what the server sends, its goodbye included
    socket.once('close', () => resolve());
  });
}

describe('EventsGrpcServer', () => {
  it('closes connections that make no call: one silent from the start, one after opening HTTP/2', async () => {
    const server = new EventsGrpcServer(
      {} as EventFeed,
      pino({ level: 'silent' }),
      null,
      null,
      null,
      300,
    );
    const address = await server.listen('127.0.0.1', 0);
    try {
      const port = Number(address.split(':').at(-1));
      await Promise.all([
        closedAfterSending(port, ''),
        closedAfterSending(port, 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'),
      ]);
    } finally {
      await server.close();
    }
  });
});

describe('EventsGrpcServer streams per connection', () => {
  it('tells each client how many calls it may have open at once on a connection', async () => {
    const server = new EventsGrpcServer({} as EventFeed, pino({ level: 'silent' }));
    const address = await server.listen('127.0.0.1', 0);
    const session = http2.connect(`http://${address}`);
    try {
      await once(session, 'remoteSettings');
      expect(session.remoteSettings.maxConcurrentStreams).toBe(MAX_STREAMS_PER_CONNECTION);
    } finally {
      session.destroy();
      await server.close();
    }
  });
});
