import { Controller, Delete, Get, HttpCode, Param, Post, Query, Req } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import {
  CreatedToken,
  CreateTokenCommand,
  RevokeTokenCommand,
} from '../../application/auth/token-commands';
import { TOKEN_INVALID } from '../../domain/auth';
import { DomainError } from '../../domain/shared/domain-error';
import { TokenReadModel, TokenSummary } from '../auth/token-read-model';
import { Access, AuthedRequest } from './access';
import { callerOf } from './caller';
import { parseJson, readBody } from './read-body';

const invalid = (message: string) => new DomainError(TOKEN_INVALID, message);

/**
 * Tokens over REST (`kl token`), for `admin` tokens only. The secret is in
 * the creation's answer and nowhere else, ever.
 */
@Controller('v1/admin/tokens')
@Access.admin()
export class TokensController {
  constructor(
    private readonly commands: CommandBus,
    private readonly tokens: TokenReadModel,
  ) {}

  /** `{"name", "scopes": [...], "expires_at"?: ISO time, "cert_subject"?: "CN=…"}` */
  @Post()
  @HttpCode(201)
  async create(@Req() req: AuthedRequest): Promise<CreatedTokenWire> {
    const body = parseJson(await readBody(req, 64 * 1024, 'token'), 'REQUEST.INVALID', 'token');
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      throw invalid('body must be {"name", "scopes": [...], "expires_at"?, "cert_subject"?}');
    }
    const b = body as Record<string, unknown>;
    const unknown = Object.keys(b).filter(
      (k) => !['name', 'scopes', 'expires_at', 'cert_subject'].includes(k),
    );
    if (unknown.length) throw invalid(`unknown field(s): ${unknown.join(', ')}`);
    if (typeof b.name !== 'string') throw invalid('name must be a string');
    if (!Array.isArray(b.scopes) || !b.scopes.every((s) => typeof s === 'string')) {
      throw invalid('scopes must be an array of strings such as "write:team-a/*"');
    }
    const expiresAt = optionalString(b.expires_at, 'expires_at');
    if (expiresAt !== null && Number.isNaN(Date.parse(expiresAt))) {
      throw invalid('expires_at must be an ISO date-time');
    }
    const created = await this.commands.execute(
      new CreateTokenCommand({
        name: b.name,
        scopes: b.scopes as string[],
        expiresAt: expiresAt === null ? null : new Date(expiresAt).toISOString(),
        certSubject: optionalString(b.cert_subject, 'cert_subject'),
        caller: callerOf(req),
      }),
    );
    return wire(created);
  }

  @Get()
  async list(@Query('all') all: unknown): Promise<{ tokens: TokenSummary[] }> {
    if (all !== undefined && all !== 'true' && all !== 'false') {
      throw new DomainError('REQUEST.INVALID', 'all must be true or false');
    }
    return { tokens: await this.tokens.list(all === 'true') };
  }

  @Delete(':name')
  @HttpCode(200)
  async revoke(@Param('name') name: string, @Req() req: AuthedRequest) {
    await this.commands.execute(new RevokeTokenCommand({ name, caller: callerOf(req) }));
    return { revoked: name };
  }
}

export interface CreatedTokenWire {
  name: string;
  token: string | null;
  prefix: string | null;
  scopes: string[];
  expires_at: string | null;
  cert_subject: string | null;
}

export function wire(t: CreatedToken): CreatedTokenWire {
  return {
    name: t.name,
    token: t.secret,
    prefix: t.prefix,
    scopes: t.scopes,
    expires_at: t.expiresAt,
    cert_subject: t.certSubject,
  };
}

function optionalString(value: unknown, name: string): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string') throw invalid(`${name} must be a string`);
  return value;
}
