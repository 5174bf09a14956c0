import { STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { NextFunction, Request, Response } from 'express';
import { errorBody } from './error.filter';

/**
 * Requests Node's HTTP server refuses before any route sees them (headers
 * too large, malformed requests, requests too slow to arrive, an Expect
 * other than 100-continue) get our JSON error too, instead of Node's
 * bodiless answer.
 */
export function answerClientErrors(server: Server): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const [status, code, message] = refusalOf(err.code);
    const body = JSON.stringify(errorBody(code, message));
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
  // Listened to, Node no longer answers an unmet Expect itself.
  server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    const expect = String(req.headers.expect).slice(0, 100);
    const body = JSON.stringify(
      errorBody('REQUEST.INVALID', `Expect: ${expect} cannot be met: only Expect: 100-continue is`),
    );
    res
      .writeHead(417, {
        'Content-Type': 'application/json',
        'Content-Length': Buffer.byteLength(body),
        Connection: 'close',
      })
      .end(body);
  });
}

function refusalOf(
  code: string | undefined,
): [number, 'REQUEST.TOO_LARGE' | 'REQUEST.INVALID', string] {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return [431, 'REQUEST.TOO_LARGE', 'request headers (or URL) are too large'];
    // Headers or body slower than the server's timeouts (a client that stalls).
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return [
        408,
        'REQUEST.INVALID',
        'the request did not arrive in time: send it whole, without pauses',
      ];
    default:
      return [400, 'REQUEST.INVALID', 'malformed HTTP request'];
  }
}

/**
 * No route takes a NUL character in its path or query (names, addresses,
 * sources and aliases are all text PostgreSQL stores or compares), so one
 * refusal here covers every route, reads included.
 */
export function refuseNulInUrl(req: Request, res: Response, next: NextFunction): void {
  if (/%00/.test(req.originalUrl)) {
    res
      .status(400)
      .json(errorBody('REQUEST.INVALID', 'the request URL holds a NUL character (%00)'));
    return;
  }
  next();
}
