import { once } from 'node:events';
import { Controller, Get, HttpCode, Inject, Param, Post, Query, Req, Res } from '@nestjs/common';
import type { Request, Response } from 'express';
import { STATE_ARCHIVES, StateArchives } from '../../application/archive/state-archive';
import { DomainError } from '../../domain/shared/domain-error';
import { CONFIG, type Config } from '../config/config';
import { callerOf } from './caller';
import { readBody, utf8Text } from './read-body';
import { stateNameFrom } from './state-name';
import { Access } from './access';
import { Heavy } from './caller-bounds';

/**
 * `GET /v1/archives/<name>`: the state's whole history as NDJSON
 * (`kl archive export`). `POST /v1/archives[?name=NEW]` with such an
 * archive (`application/x-ndjson`) recreates that history under the
 * archive's name or NEW, refused if the name has a history already.
 */
@Controller('v1/archives')
export class ArchivesController {
  constructor(
    @Inject(STATE_ARCHIVES) private readonly archives: StateArchives,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  @Get('*path')
  @Access.state('read', (req) => stateNameFrom(req.params.path as unknown as string[]))
  @Heavy('export')
  async export(@Param('path') path: string[], @Res() res: Response): Promise<void> {
    const name = stateNameFrom(path);
    // A client gone mid-export never drains its socket again: stop there.
    const gone = new AbortController();
    res.once('close', () => gone.abort());
    const lines = this.archives.export(name)[Symbol.asyncIterator]();
    // The first line comes only once the history was read: a missing state
    // is still a JSON 404.
    const first = await lines.next();
    res.writeHead(200, {
      'Content-Type': 'application/x-ndjson; charset=utf-8',
      'Content-Disposition': `attachment; filename="${name.replace(/[^\w.-]+/g, '_')}.kla"`,
    });
    try {
      if (!first.done) res.write(first.value);
      for (let next = await lines.next(); !next.done; next = await lines.next()) {
        if (!res.write(next.value)) {
          await once(res, 'drain', { signal: gone.signal }).catch(() => undefined);
        }
        if (gone.signal.aborted) break;
      }
      res.end();
    } catch (err) {
      // Too late for a status: cut the stream, and the checksum tells the reader.
      res.destroy(err as Error);
    } finally {
      // Lets go of the history being read (a page of events) at once.
      await lines.return?.(undefined);
    }
  }

  @Post()
  @Access.admin()
  @HttpCode(200)
  async import(
    @Query('name') name: unknown,
    @Req() req: Request & { id?: string },
  ): Promise<{ state: string; events: number; versions: number }> {
    if (name !== undefined && typeof name !== 'string') {
      throw new DomainError('REQUEST.INVALID', 'name may be given once');
    }
    const target = name === undefined ? null : stateNameFrom(name);
    const body = await readBody(req, this.config.maxStateBytes, 'archive');
    const text = utf8Text(body, 'ARCHIVE.INVALID', 'archive');
    return this.archives.import(text, target, callerOf(req), (n) => stateNameFrom(n));
  }
}
