import * as net from 'node:net';
import type { NextFunction, Request, Response } from 'express';
import type { ErrorCode } from '../../domain/shared/error-codes';
import { errorBody } from './error.filter';
import { HTTP_STATUS_BY_CODE } from './error-status';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
// JSON, or JSON lines (an archive import): neither is a type a page may send
// cross-site without a preflight.
const JSON_TYPE = /^application\/(?:(?:[\w.+-]+\+)?json|x-ndjson)\s*(?:;|$)/i;

/**
 * Keeps web pages from using a kld they can reach (a developer's
 * 127.0.0.1:8080) through the visitor's browser. Terraform, curl and `kl`
 * send no Origin and are not affected; browsers always send one on a
 * cross-site write, and cannot send JSON cross-site without a preflight
 * that kld never answers.
 *
 * - Origin, when present, must be kld's own (http://<its loopback names or
 *   address>:<its port>) or listed in KL_ALLOWED_ORIGINS.
 * - Without Origin, a write marked `Sec-Fetch-Site: cross-site|same-site`
 *   is refused too.
 * - On a loopback socket the Host header must be a loopback name (or an
 *   allowed origin's host): a page whose DNS name was rebound to 127.0.0.1
 *   would otherwise be same-origin with kld and read every state.
 * - A request body must be JSON or JSON lines (every body kld accepts is).
 * A refusal is answered here, before any route runs, and changes nothing.
 */
export function crossSiteGuard(allowedOrigins: readonly string[]) {
  const allowed = new Set(allowedOrigins);
  const allowedHosts = new Set(allowedOrigins.map((o) => new URL(o).hostname));
  return (req: Request, res: Response, next: NextFunction): void => {
    const refusal =
      hostRefusal(req, allowedHosts) ??
      originRefusal(req, allowed) ??
      fetchSiteRefusal(req) ??
      contentTypeRefusal(req);
    if (refusal === null) return next();
    res.status(HTTP_STATUS_BY_CODE[refusal.code]).json(errorBody(refusal.code, refusal.message));
  };
}

interface Refusal {
  code: Extract<ErrorCode, `REQUEST.${string}`>;
  message: string;
}

function hostRefusal(req: Request, allowedHosts: Set<string>): Refusal | null {
  const header = req.headers.host;
  if (header === undefined || !isLoopbackAddress(req.socket.localAddress ?? '')) return null;
  const host = hostnameOf(header);
  if (host !== null && (isLoopbackName(host) || allowedHosts.has(host))) return null;
  return {
    code: 'REQUEST.FORBIDDEN_HOST',
    message:
      `Host "${shorten(header)}" is not a loopback name: kld on a loopback address answers only ` +
      'requests addressed to localhost, 127.0.0.1 or [::1] (a proxy that keeps the Host header needs its origin in KL_ALLOWED_ORIGINS)',
  };
}

function originRefusal(req: Request, allowed: Set<string>): Refusal | null {
  const header = req.headers.origin;
  if (header === undefined) return null;
  const origin = originOf(header);
  if (origin !== null && (allowed.has(origin) || ownOrigins(req).includes(origin))) return null;
  return {
    code: 'REQUEST.FORBIDDEN_ORIGIN',
    message:
      `cross-site request refused: origin "${shorten(header)}" is neither kld's own ` +
      `(${ownOrigins(req).join(', ')}) nor listed in KL_ALLOWED_ORIGINS`,
  };
}

function fetchSiteRefusal(req: Request): Refusal | null {
  const site = req.header('sec-fetch-site');
  if (SAFE_METHODS.has(req.method) || (site !== 'cross-site' && site !== 'same-site')) return null;
  return {
    code: 'REQUEST.FORBIDDEN_ORIGIN',
    message: `cross-site request refused: the browser marked it Sec-Fetch-Site: ${site}`,
  };
}

function contentTypeRefusal(req: Request): Refusal | null {
  const length = Number(req.headers['content-length'] ?? 0);
  const hasBody = req.headers['transfer-encoding'] !== undefined || length > 0;
  const type = req.headers['content-type'];
  if (!hasBody || (type !== undefined && JSON_TYPE.test(type))) return null;
  return {
    code: 'REQUEST.UNSUPPORTED_MEDIA_TYPE',
    message: `request body must be JSON with Content-Type: application/json (or JSON lines, application/x-ndjson), got ${
      type === undefined ? 'no Content-Type' : `"${shorten(type)}"`
    }`,
  };
}

/** http://<name>:<port> for every name a browser could use for the socket this request came in on. */
function ownOrigins(req: Request): string[] {
  const port = req.socket.localPort;
  const address = unmapped(req.socket.localAddress ?? '');
  const names = new Set<string>();
  if (isLoopbackAddress(address) || address === '') {
    names.add('localhost').add('127.0.0.1').add('[::1]');
  }
  if (address !== '') names.add(net.isIPv6(address) ? `[${address}]` : address);
  return [...names].map((name) => `http://${name}:${port}`);
}

function originOf(header: string): string | null {
  try {
    const url = new URL(header);
    return url.origin === 'null' ? null : url.origin;
  } catch {
    return null;
  }
}

function hostnameOf(hostHeader: string): string | null {
  try {
    return new URL(`http://${hostHeader}`).hostname;
  } catch {
    return null;
  }
}

function unmapped(address: string): string {
  return address.startsWith('::ffff:') && net.isIPv4(address.slice(7)) ? address.slice(7) : address;
}

function isLoopbackAddress(address: string): boolean {
  const a = unmapped(address);
  return (net.isIPv4(a) && a.startsWith('127.')) || a === '::1';
}

/** Names browsers resolve to loopback themselves, so DNS cannot rebind them. */
function isLoopbackName(hostname: string): boolean {
  const h = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h.endsWith('.localhost') || isLoopbackAddress(h);
}

function shorten(text: string): string {
  return text.length > 100 ? `${text.slice(0, 100)}…` : text;
}
