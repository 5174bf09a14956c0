import { DynamicModule, Module } from '@nestjs/common';
import { CqrsModule } from '@nestjs/cqrs';
import { Runtime, RuntimeModule } from './runtime.module';
import { TokensModule } from './tokens.module';

/** `kld token create`: token commands and their read model, and nothing served. */
@Module({})
export class TokenAdminModule {
  static forRuntime(runtime: Runtime): DynamicModule {
    return {
      module: TokenAdminModule,
      imports: [RuntimeModule.forRoot(runtime), CqrsModule.forRoot(), TokensModule],
    };
  }
}
