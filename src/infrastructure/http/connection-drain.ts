import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { Server as TlsServer } from 'node:tls';

export interface DrainableConnections {
  /**
   * Ends every connection with no request in flight now, the others as their
   * response finishes, and whatever is still open after `graceMs`. Call it as
   * shutdown starts; `stop()` when the server has closed.
   */
  drain(graceMs: number): void;
  stop(): void;
}

/**
 * Keeps idle connections open for `keepAliveMs` and still lets kld stop at once.
 *
 * Idle connections outlive a load balancer's (60 s is the common default), so a
 * balancer or a client that reuses one never races kld closing it (Node's 5 s).
 * Node's `close()` ends only connections that have finished a request: one that
 * was opened and never used would hold shutdown for the whole keep-alive.
 *
 * A connection must also begin its first request within the headers timeout:
 * Node counts that timeout only from a request's first byte, so a connection
 * that never sends one would stay open for good, and enough of them take
 * every file descriptor kld has (its database connections included).
 */
export function drainableConnections(server: Server, keepAliveMs: number): DrainableConnections {
  server.keepAliveTimeout = keepAliveMs;
  server.headersTimeout = keepAliveMs + 1_000;
  const requestsOn = new Map<Socket, number>();
  let draining = false;
  let late: NodeJS.Timeout | undefined;
  // A TLS server hands requests the decrypted socket, not the TCP one.
  const silent = new Map<Socket, NodeJS.Timeout>();
  server.on(server instanceof TlsServer ? 'secureConnection' : 'connection', (socket: Socket) => {
    requestsOn.set(socket, 0);
    // One that began a request is Node's to time out (a JSON 408, answerClientErrors).
    const timer = setTimeout(() => {
      if (socket.bytesRead === 0) socket.destroy();
    }, server.headersTimeout);
    timer.unref();
    silent.set(socket, timer);
    socket.once('close', () => {
      requestsOn.delete(socket);
      clearTimeout(silent.get(socket));
      silent.delete(socket);
    });
  });
  server.on('request', (req, res) => {
    const socket = req.socket;
    clearTimeout(silent.get(socket));
    silent.delete(socket);
    requestsOn.set(socket, (requestsOn.get(socket) ?? 0) + 1);
    res.once('close', () => {
      const left = (requestsOn.get(socket) ?? 1) - 1;
      requestsOn.set(socket, left);
      if (draining && left === 0) socket.destroySoon();
    });
  });
  return {
    drain(graceMs) {
      draining = true;
      for (const [socket, requests] of requestsOn) if (requests === 0) socket.destroySoon();
      late = setTimeout(() => server.closeAllConnections(), graceMs);
      late.unref();
    },
    stop() {
      clearTimeout(late);
    },
  };
}
