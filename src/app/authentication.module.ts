import { Module } from '@nestjs/common';
import { CLOCK, type Clock } from '../application/ports/clock.port';
import { AUTHENTICATOR, Authenticator } from '../infrastructure/auth/authenticator';
import { TokenReadModel } from '../infrastructure/auth/token-read-model';
import { CONFIG, type Config } from '../infrastructure/config/config';
import { LOGGER, type Logger } from '../infrastructure/logging/logger';
import { CallerBounds } from '../infrastructure/http/caller-bounds';
import { TokensModule } from './tokens.module';

/**
 * Who a caller is, for every transport: the HTTP guard (AuthModule) and the
 * gRPC event service (EventsModule) authenticate with the same Authenticator
 * (null when authentication is off), and count heavy calls against the
 * same per-caller bounds.
 */
@Module({
  imports: [TokensModule],
  providers: [
    {
      provide: AUTHENTICATOR,
      useFactory: (config: Config, tokens: TokenReadModel, logger: Logger, clock: Clock) =>
        config.auth.enabled ? new Authenticator(tokens, logger, () => clock.now()) : null,
      inject: [CONFIG, TokenReadModel, LOGGER, CLOCK],
    },
    // One count per process, whichever transport a heavy call comes by.
    {
      provide: CallerBounds,
      useFactory: (config: Config) => new CallerBounds(config.callerLimits, config.totalLimits),
      inject: [CONFIG],
    },
  ],
  exports: [AUTHENTICATOR, CallerBounds],
})
export class AuthenticationModule {}
