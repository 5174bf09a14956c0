import { Module } from '@nestjs/common';
import { APP_GUARD, Reflector } from '@nestjs/core';
import { CLOCK, type Clock } from '../application/ports/clock.port';
import { Authenticator } from '../infrastructure/auth/authenticator';
import { TokenReadModel } from '../infrastructure/auth/token-read-model';
import { CONFIG, type Config } from '../infrastructure/config/config';
import { AuthGuard } from '../infrastructure/http/auth.guard';
import { TokensController } from '../infrastructure/http/tokens.controller';
import { LOGGER, type Logger } from '../infrastructure/logging/logger';
import { TokensModule } from './tokens.module';

/**
 * Authentication and authorization of every route (the global AuthGuard:
 * each route's `@Access` rule against the request's token) and the token
 * API. With authentication off (loopback, or KL_AUTH=off) the guard lets
 * everything through, as before tokens existed.
 */
@Module({
  imports: [TokensModule],
  controllers: [TokensController],
  providers: [
    {
      provide: APP_GUARD,
      useFactory: (
        reflector: Reflector,
        config: Config,
        tokens: TokenReadModel,
        logger: Logger,
        clock: Clock,
      ) =>
        new AuthGuard(
          reflector,
          config.auth.enabled ? new Authenticator(tokens, logger, () => clock.now()) : null,
        ),
      inject: [Reflector, CONFIG, TokenReadModel, LOGGER, CLOCK],
    },
  ],
})
export class AuthModule {}
