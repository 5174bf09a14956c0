import * as net from 'node:net';
import pino from 'pino';
import type { EventFeed } from '../../application/events/event-feed';
import { EventsGrpcServer } from './events-grpc.server';

describe('EventsGrpcServer', () => {
  it('closes a connection that makes no call for the idle time', async () => {
    const server = new EventsGrpcServer(
      {} as EventFeed,
      pino({ level: 'silent' }),
      null,
      null,
      300,
    );
    const address = await server.listen('127.0.0.1', 0);
    try {
      const port = Number(address.split(':').at(-1));
      const socket = net.connect(port, '127.0.0.1', () =>
        // An HTTP/2 client's opening, then nothing.
        socket.write('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'),
      );
      socket.on('error', () => undefined);
      socket.resume(); // reads what the server sends, its goodbye included
      await new Promise((resolve) => socket.once('close', resolve));
    } finally {
      await server.close();
    }
  });
});
