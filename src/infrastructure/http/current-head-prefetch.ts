import { Injectable, NestMiddleware } from '@nestjs/common';
import type { NextFunction, Request, Response } from 'express';
import type { CurrentHead } from '../read-models/state-document-read-model';
import { StateDocumentReadModel } from '../read-models/state-document-read-model';
import { stateNameFrom } from './state-name';

/** The check started for a request, by the state name it was started for. */
const started = new WeakMap<Request, { name: string; head: Promise<CurrentHead | null> }>();

/**
 * `GET /v1/states/<name>` of the current document: the check of which
 * version is current (a statement, so that a GET on any replica sees the
 * last commit) is sent as the route is matched, before the guard
 * authenticates the request (a token's lookup is a statement too) and the
 * rest of Nest's pipeline runs, so that its round trip runs beside them
 * rather than after them. Only the check starts here: the document's bytes
 * (when this process does not hold them) are read by the handler, once the
 * access rule has let the request in. A request refused on the way has cost
 * one indexed statement, as the lookup of a wrong token does.
 */
@Injectable()
export class CurrentHeadPrefetch implements NestMiddleware {
  constructor(private readonly documents: StateDocumentReadModel) {}

  use(req: Request, _res: Response, next: NextFunction): void {
    const name = currentDocumentName(req);
    if (name === null) return next();
    const head = this.documents.currentHead(name);
    head.catch(() => undefined); // a request refused on the way never awaits it
    started.set(req, { name, head });
    // The pool sends the statement on the next tick: let it go out before
    // the rest of the pipeline runs, not after its synchronous part.
    process.nextTick(next);
  }
}

/** The check `CurrentHeadPrefetch` started for this request, if it was for `name`. */
export function prefetchedHead(
  req: Request,
  name: string,
): Promise<CurrentHead | null> | undefined {
  const entry = started.get(req);
  return entry?.name === name ? entry.head : undefined;
}

/** The state whose current document the request asks for; null for anything else (the handler answers it). */
function currentDocumentName(req: Request): string | null {
  const { serial, version } = req.query;
  if (serial !== undefined || version !== undefined) return null;
  try {
    return stateNameFrom(req.params.name as unknown as string[]);
  } catch {
    return null;
  }
}
