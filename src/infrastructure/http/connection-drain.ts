import type { Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Writable } from 'node:stream';
import { Server as TlsServer } from 'node:tls';

/**
 * How long kld keeps an idle connection unless KL_HTTP_IDLE_TIMEOUT says:
 * longer than a load balancer's (60 s is the common default).
 */
export const DEFAULT_IDLE_MS = 65_000;

/** Each connection's idle bound: its server's (drainableConnections). */
const idleBounds = new WeakMap<Socket, number>();

/**
 * How long the connection `res` goes out on may sit idle (the idle bound of
 * the server that took it); DEFAULT_IDLE_MS for any other stream.
 */
export function idleBoundOf(res: Writable): number {
  const socket = (res as Partial<ServerResponse>).socket;
  return (socket && idleBounds.get(socket)) ?? DEFAULT_IDLE_MS;
}

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
 * Idle connections outlive a load balancer's (KL_HTTP_IDLE_TIMEOUT, longer than
 * the balancer's), so a balancer or a client that reuses one never races kld
 * closing it (Node's 5 s). Node's `close()` ends only connections that have
 * finished a request: one that was opened and never used would hold shutdown
 * for the whole keep-alive.
 *
 * A connection must also begin its first request within the keep-alive and a
 * second: Node counts the headers timeout only from a request's first byte,
 * so a connection that never sends one would stay open for good, and enough
 * of them take every file descriptor kld has (its database connections included).
 */
export function drainableConnections(server: Server, keepAliveMs: number): DrainableConnections {
  server.keepAliveTimeout = keepAliveMs;
  // A connection that never sends a byte is as idle as a kept-alive one.
  const unusedMs = keepAliveMs + 1_000;
  // Longer than the keep-alive (which Node before 18 counted into the headers'
  // time); never longer than the whole request may take (Node's own rule; 5 min).
  server.headersTimeout = Math.min(unusedMs, server.requestTimeout);
  const requestsOn = new Map<Socket, number>();
  let draining = false;
  let late: NodeJS.Timeout | undefined;
  // A TLS server hands requests the decrypted socket, not the TCP one.
  const silent = new Map<Socket, NodeJS.Timeout>();
  server.on(server instanceof TlsServer ? 'secureConnection' : 'connection', (socket: Socket) => {
    requestsOn.set(socket, 0);
    idleBounds.set(socket, keepAliveMs);
    // One that began a request is Node's to time out (a JSON 408, answerClientErrors).
    const timer = setTimeout(() => {
      if (socket.bytesRead === 0) socket.destroy();
    }, unusedMs);
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
