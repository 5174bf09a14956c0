import { randomBytes } from 'node:crypto';
import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import {
  checkTokenName,
  TOKEN_SNAPSHOT_SCHEMA,
  TokenCommand,
  tokenDecider,
  TokenEvent,
  tokenSecretHash,
  TokenState,
  tokenStreamId,
} from '../../domain/auth';
import type { Caller } from '../command-context';
import { AggregateSpec, DeciderService } from '../decider.service';
import { CommandWith } from '../props-message';

/** One stream per token name. */
export const TOKEN: AggregateSpec<TokenCommand, TokenState, TokenEvent> = {
  name: 'token',
  decider: tokenDecider,
  streamOf: (command) => tokenStreamId(command.data.name),
  snapshots: {
    schema: TOKEN_SNAPSHOT_SCHEMA,
    to: (state) => state,
    from: (json) => json as TokenState,
  },
  done: (command) =>
    command.type === 'CreateToken'
      ? `token ${command.data.name} created`
      : `token ${command.data.name} revoked`,
};

/** Characters of the secret shown by `kl token list`, `kl_` included. */
const PREFIX_LENGTH = 11;

export interface CreatedToken {
  name: string;
  tokenId: string;
  /** Shown once, to whoever created it; null for a certificate identity. */
  secret: string | null;
  prefix: string | null;
  scopes: string[];
  expiresAt: string | null;
  certSubject: string | null;
}

export class CreateTokenCommand extends CommandWith<
  {
    name: string;
    scopes: string[];
    expiresAt: string | null;
    /** A certificate identity instead of a secret. */
    certSubject?: string | null;
    caller: Caller;
  },
  CreatedToken
>() {}

export class RevokeTokenCommand extends CommandWith<{ name: string; caller: Caller }, void>() {}

/** `kl_` and 256 random bits, base64url: 46 characters. */
export function newTokenSecret(): string {
  return `kl_${randomBytes(32).toString('base64url')}`;
}

@CommandHandler(CreateTokenCommand)
export class CreateTokenHandler implements ICommandHandler<CreateTokenCommand> {
  constructor(private readonly deciders: DeciderService) {}

  async execute(c: CreateTokenCommand): Promise<CreatedToken> {
    const name = checkTokenName(c.name);
    const certSubject = c.certSubject ?? null;
    const secret = certSubject === null ? newTokenSecret() : null;
    const tokenId = this.deciders.newId();
    const { events } = await this.deciders.execute(TOKEN, {
      type: 'CreateToken',
      data: {
        name,
        tokenId,
        prefix: secret === null ? null : secret.slice(0, PREFIX_LENGTH),
        secretHash: secret === null ? null : tokenSecretHash(secret),
        certSubject,
        scopes: c.scopes,
        expiresAt: c.expiresAt,
      },
      metadata: this.deciders.context(c.caller),
    });
    const created = events[0];
    if (created?.type !== 'TokenCreated') throw new Error('token creation decided nothing');
    const d = created.data;
    return {
      name,
      tokenId,
      secret,
      prefix: d.prefix,
      scopes: d.scopes,
      expiresAt: d.expiresAt,
      certSubject: d.certSubject,
    };
  }
}

@CommandHandler(RevokeTokenCommand)
export class RevokeTokenHandler implements ICommandHandler<RevokeTokenCommand> {
  constructor(private readonly deciders: DeciderService) {}

  async execute(c: RevokeTokenCommand): Promise<void> {
    await this.deciders.execute(TOKEN, {
      type: 'RevokeToken',
      data: { name: checkTokenName(c.name) },
      metadata: this.deciders.context(c.caller),
    });
  }
}

export const TOKEN_COMMAND_HANDLERS = [CreateTokenHandler, RevokeTokenHandler];
