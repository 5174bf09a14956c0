import type { NextFunction, Request, Response } from 'express';
import type { Authenticator } from '../auth/authenticator';
import type {
  CurrentHead,
  ServedVersion,
  StateDocumentReadModel,
} from '../read-models/state-document-read-model';
import type { AccessRule, AuthedRequest } from './access';
import { admit } from './auth.guard';
import type { ErrorFilter } from './error.filter';
import { STATE_VERSION_HEADER } from './headers';
import { carriesBody } from './passed-over-input';
import { stateNameFrom } from './state-name';
import { writeInTurns } from './write-in-turns';

/** Express's path of the backend's document routes, as Nest registers `v1/states/*name`. */
export const CURRENT_DOCUMENT_PATH = '/v1/states/*name';

/**
 * `GET /v1/states/<name>` of the current document, terraform's read before
 * every plan and push, answered as an Express route ahead of Nest's: Nest's
 * pipeline for the same answer (its middleware, two guards, pipes, the
 * handler's promise chain) cost about a tenth of kld's CPU per GET of a
 * small state (docs/performance-history.md, "kld's fixed cost per small
 * request (wave 23)"). What the pipeline did for this request is done here
 * with the same code: the route's own access rule (the controller's
 * `@Access`) through `admit`, every refusal answered by the ErrorFilter. The
 * route is not a heavy one (no caller bound) and takes no body or DTO.
 *
 * The check of which version is current (a statement, so that a GET on any
 * replica sees the last commit) is sent before the request is
 * authenticated (a token's lookup is a statement too), so that the two
 * round trips overlap; a request refused has cost one indexed statement, as
 * the lookup of a wrong token does.
 *
 * Anything else goes on to the controller, which answers it as before: a
 * past version (`?serial`, `?version`), a name it refuses or that names an
 * action, and a state with no current document (its 404 says which is
 * missing), the principal already known.
 */
export class CurrentDocumentRoute {
  constructor(
    private readonly documents: StateDocumentReadModel,
    private readonly authenticator: Authenticator | null,
    private readonly errors: ErrorFilter,
    /** The controller's rule for the same route. */
    private readonly rule: AccessRule,
  ) {}

  readonly handle = (req: Request, res: Response, next: NextFunction): void => {
    const name = currentDocumentName(req);
    if (name === null) return next();
    const head = this.documents.currentHead(name);
    head.catch(() => undefined); // a request refused never awaits it
    this.serve(req, res, name, head).then(
      (served) => {
        if (!served) next();
      },
      (err: unknown) => this.errors.reply(err, req, res),
    );
  };

  private async serve(
    req: Request,
    res: Response,
    name: string,
    head: Promise<CurrentHead | null>,
  ): Promise<boolean> {
    await admit(this.authenticator, req as AuthedRequest, this.rule);
    const served = await this.documents.currentBody(name, head);
    if (served === null) return false;
    await sendDocument(res, served);
    return true;
  }
}

/**
 * Up to this size a document is written and ended in the same turn (the
 * socket takes most of it at once); above it, kld watches its reader take it.
 */
export const WATCHED_DOCUMENT_BYTES = 1024 * 1024;

/**
 * A served document as the answer: its bytes, their length and MD5, and which
 * version it is; its parts themselves (no copy: joining them copied the whole
 * document per GET, 13 MB at 20k, and those fresh buffers spent V8's
 * external-memory allowance), corked, so the socket takes them in one
 * vectored write. A big one is then watched as its reader takes it
 * (writeInTurns): a reader that takes nothing for kld's idle bound (65 s unless
 * KL_HTTP_IDLE_TIMEOUT says) is cut off. Left to a reader that stopped
 * reading, it stayed in kld for as long as the connection,
 * and a past version is built for each request: ten such readers of a 40 MB
 * version held 460 MB of kld's memory until they went. All of it goes in one
 * piece: the parts are made already (nothing is left to make a turn at a
 * time) and held until the answer ends either way, and a piece of 1 MiB per
 * turn cost kld about 40 % more CPU per GET of a 20k state than one write
 * (docs/performance-history.md, "What waves 24–26 cost terraform's paths").
 */
export async function sendDocument(res: Response, served: ServedVersion): Promise<void> {
  res.statusCode = 200;
  res.setHeader('Content-Type', 'application/json');
  res.setHeader('Content-Length', served.size);
  res.setHeader('Content-MD5', served.md5);
  res.setHeader(STATE_VERSION_HEADER, String(served.version));
  if (served.size > WATCHED_DOCUMENT_BYTES) {
    await writeInTurns(res, [served.parts]);
    return;
  }
  res.cork();
  for (const part of served.parts) res.write(part);
  res.uncork();
  res.end();
}

/**
 * The state whose current document the request asks for; null for anything
 * else (the controller answers it): any query parameter, a past version's
 * (`?serial`, `?version`) or one the controller refuses, and a body, which it
 * refuses too (PassedOverInputGuard).
 */
function currentDocumentName(req: Request): string | null {
  if (Object.keys(req.query as object).length > 0 || carriesBody(req)) return null;
  try {
    return stateNameFrom(req.params.name as unknown as string[]);
  } catch {
    return null;
  }
}
