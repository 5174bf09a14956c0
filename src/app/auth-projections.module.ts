import { Module } from '@nestjs/common';
import { AUTH_PROJECTORS } from '../projections/auth/auth-tokens.projector';

/** The tokens read model (`auth_tokens`), which authentication reads. */
@Module({ providers: [...AUTH_PROJECTORS] })
export class AuthProjectionsModule {}
