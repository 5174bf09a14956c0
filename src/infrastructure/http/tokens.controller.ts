import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query, Req } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import {
  CreatedToken,
  CreateTokenCommand,
  RevokeTokenCommand,
} from '../../application/auth/token-commands';
import { TokenReadModel, TokenSummary } from '../auth/token-read-model';
import { Access, AuthedRequest } from './access';
import { callerOf } from './caller';
import { CreateTokenDto, TokensQueryDto } from './dto/token.dto';
import { JsonBody } from './json-body';

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

  @Post()
  @HttpCode(201)
  @JsonBody({ what: 'token', limit: 64 * 1024 })
  async create(@Body() body: CreateTokenDto, @Req() req: AuthedRequest): Promise<CreatedTokenWire> {
    const created = await this.commands.execute(
      new CreateTokenCommand({
        name: body.name,
        scopes: body.scopes,
        expiresAt: body.expires_at === undefined ? null : new Date(body.expires_at).toISOString(),
        certSubject: body.cert_subject ?? null,
        caller: callerOf(req),
      }),
    );
    return wire(created);
  }

  @Get()
  async list(@Query() query: TokensQueryDto): Promise<{ tokens: TokenSummary[] }> {
    return { tokens: await this.tokens.list(query.all === true) };
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
