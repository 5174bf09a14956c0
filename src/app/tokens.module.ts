import { Module } from '@nestjs/common';
import { TOKEN_COMMAND_HANDLERS } from '../application/auth/token-commands';
import { TokenReadModel } from '../infrastructure/auth/token-read-model';
import { DATABASE, Database } from '../infrastructure/postgres/database';
import { AuthProjectionsModule } from './auth-projections.module';
import { DeciderModule } from './decider.module';

/**
 * Token creation and revocation, and the read model they land in: what
 * `kld token create` runs with no server, and what AuthModule serves.
 */
@Module({
  imports: [DeciderModule, AuthProjectionsModule],
  providers: [
    ...TOKEN_COMMAND_HANDLERS,
    {
      provide: TokenReadModel,
      useFactory: (db: Database) => new TokenReadModel(db),
      inject: [DATABASE],
    },
  ],
  exports: [TokenReadModel],
})
export class TokensModule {}
