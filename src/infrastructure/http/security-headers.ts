import type { NextFunction, Request, Response } from 'express';

// An answer of the API is data, never a page: nothing in it may run, load or be framed.
const API_CSP = "default-src 'none'; frame-ancestors 'none'; sandbox";

/**
 * Headers that keep a browser from treating what kld sends as anything but
 * what it says it is. Much of it was written by other users (state values,
 * actors, lock info, run info): a browser that guessed HTML from a JSON or
 * text answer, or a page that framed kld and lured a click, would act with
 * the visitor's access. The dashboard (/ui) sends its own policy
 * (ui.controller.ts); the Swagger UI (/docs) runs its own scripts and
 * styles, so it gets only the framing and sniffing headers.
 */
export function securityHeaders(req: Request, res: Response, next: NextFunction): void {
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('X-Frame-Options', 'DENY');
  if (!isPage(req.path)) res.setHeader('Content-Security-Policy', API_CSP);
  next();
}

function isPage(path: string): boolean {
  return /^\/(?:ui|docs)(?:[/-]|$)/.test(path);
}
