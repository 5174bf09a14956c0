import { Controller, Get, Param, Res } from '@nestjs/common';
import type { Response } from 'express';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { DomainError } from '../../domain/shared/domain-error';
import { packageRoot } from '../package-root';
import { Access } from './access';

/** What `npm run build` writes to dist/ui (scripts/build-ui.mjs), and nothing else is served. */
const FILES: Record<string, string> = {
  'index.html': 'text/html; charset=utf-8',
  'app.js': 'text/javascript; charset=utf-8',
  'app.css': 'text/css; charset=utf-8',
  'examples.json': 'application/json; charset=utf-8',
};

// Everything the dashboard loads comes from kld itself: no inline script, no CDN.
const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "form-action 'none'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** The web dashboard: a static page that reads the JSON API with the visitor's token. */
@Controller('ui')
export class UiController {
  private readonly dir = path.join(packageRoot(), 'dist', 'ui');

  // The page holds no data: it asks for a token when the API answers 401.
  @Get()
  @Access.public()
  index(@Res() res: Response): void {
    this.send('index.html', res);
  }

  @Get(':file')
  @Access.public()
  asset(@Param('file') file: string, @Res() res: Response): void {
    this.send(file, res);
  }

  private send(file: string, res: Response): void {
    const type = Object.prototype.hasOwnProperty.call(FILES, file) ? FILES[file] : undefined;
    if (type === undefined) {
      throw new DomainError('REQUEST.NOT_FOUND', `no such dashboard file: ${file.slice(0, 100)}`);
    }
    let body: Buffer;
    try {
      body = fs.readFileSync(path.join(this.dir, file));
    } catch {
      throw new DomainError(
        'REQUEST.NOT_FOUND',
        'the dashboard is not built: run `npm run build` (it writes dist/ui)',
      );
    }
    res
      .status(200)
      .set({
        'Content-Type': type,
        'Content-Security-Policy': CSP,
        'X-Content-Type-Options': 'nosniff',
        'Referrer-Policy': 'no-referrer',
        // The file names are not hashed: revalidate so a new build is picked up at once.
        'Cache-Control': 'no-cache',
      })
      .send(body);
  }
}
