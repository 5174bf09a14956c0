import { STATUS_CODES, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { NextFunction, Request, Response } from 'express';
import { errorBody } from './error.filter';

/**
 * Requests Node's HTTP parser refuses before any route sees them (headers
 * too large, malformed requests) get our JSON error too, instead of Node's
 * bodiless answer.
 */
export function answerClientErrors(server: Server): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const tooLarge = err.code === 'HPE_HEADER_OVERFLOW';
    const status = tooLarge ? 431 : 400;
    const body = JSON.stringify(
      errorBody(
        tooLarge ? 'REQUEST.TOO_LARGE' : 'REQUEST.INVALID',
        tooLarge ? 'request headers (or URL) are too large' : 'malformed HTTP request',
      ),
    );
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
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
