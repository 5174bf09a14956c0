import { Module } from '@nestjs/common';
import { APP_GUARD, Reflector } from '@nestjs/core';
import { AUTHENTICATOR, type Authenticator } from '../infrastructure/auth/authenticator';
import { AuthGuard } from '../infrastructure/http/auth.guard';
import { CallerBoundGuard, CallerBounds } from '../infrastructure/http/caller-bounds';
import { PassedOverInputGuard } from '../infrastructure/http/passed-over-input';
import { TokensController } from '../infrastructure/http/tokens.controller';
import { AuthenticationModule } from './authentication.module';
import { TokensModule } from './tokens.module';

/**
 * Authentication and authorization of every route (the global AuthGuard:
 * each route's `@Access` rule against the request's token) and the token
 * API. With authentication off (loopback, or KL_AUTH=off) the guard lets
 * everything through, as before tokens existed. Then the per-caller bounds
 * of the heavy routes (CallerBoundGuard), which need to know who calls.
 */
@Module({
  imports: [TokensModule, AuthenticationModule],
  controllers: [TokensController],
  providers: [
    {
      provide: APP_GUARD,
      useFactory: (reflector: Reflector, authenticator: Authenticator | null) =>
        new AuthGuard(reflector, authenticator),
      inject: [Reflector, AUTHENTICATOR],
    },
    // Global guards run in the order they are provided: these after the AuthGuard.
    {
      provide: APP_GUARD,
      useFactory: (reflector: Reflector) => new PassedOverInputGuard(reflector),
      inject: [Reflector],
    },
    {
      provide: APP_GUARD,
      useFactory: (reflector: Reflector, bounds: CallerBounds) =>
        new CallerBoundGuard(reflector, bounds),
      inject: [Reflector, CallerBounds],
    },
  ],
})
export class AuthModule {}
