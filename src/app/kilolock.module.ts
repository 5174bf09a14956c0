import { DynamicModule, Module, Type } from '@nestjs/common';
import { CqrsModule } from '@nestjs/cqrs';
import { ApplyProjectionsModule } from './apply-projections.module';
import { ApplyModule } from './apply.module';
import { ArchiveModule } from './archive.module';
import { EventsModule } from './events.module';
import { DashboardModule } from './dashboard.module';
import { AuthModule } from './auth.module';
import { AuthProjectionsModule } from './auth-projections.module';
import { OperationsModule } from './operations.module';
import { ProjectionsModule } from './projections.module';
import { QueryModule } from './query.module';
import { QuotaProjectionsModule } from './quota-projections.module';
import { QuotaModule } from './quota.module';
import { RefreshProjectionsModule } from './refresh-projections.module';
import { RefreshModule } from './refresh.module';
import { Runtime, RuntimeModule } from './runtime.module';
import { StateProjectionsModule } from './state-projections.module';
import { StateEngineModule } from './state-engine.module';
import { StateModule } from './state.module';
import { TokensModule } from './tokens.module';

export type { Runtime };

/**
 * The slices kld serves. Their order does not matter: no two of them
 * answer the same route (TerraformBackendController passes `POST
 * <name>/refresh` on to the refresh slice).
 */
export const SLICES: readonly Type[] = [
  StateModule,
  RefreshModule,
  QueryModule,
  ApplyModule,
  EventsModule,
  ArchiveModule,
  DashboardModule,
  StateEngineModule,
  QuotaModule,
];

/** Every slice's read models: what `kld projections …` loads, with nothing served. */
export const READ_MODELS: readonly Type[] = [
  StateProjectionsModule,
  RefreshProjectionsModule,
  ApplyProjectionsModule,
  AuthProjectionsModule,
  QuotaProjectionsModule,
];

/** kld serving: every slice, plus health and projection maintenance. */
@Module({})
export class KilolockModule {
  static forRuntime(runtime: Runtime, slices: readonly Type[] = SLICES): DynamicModule {
    return {
      module: KilolockModule,
      // Not a slice: its guard checks every slice's routes, so it is always there.
      imports: [
        RuntimeModule.forRoot(runtime),
        CqrsModule.forRoot(),
        OperationsModule,
        AuthModule,
        ...slices,
      ],
    };
  }
}

/**
 * kld's maintenance commands (`kld projections rebuild|skip`): the
 * projection runner with every read model, and no controllers, command
 * handlers or background work.
 */
@Module({})
export class MaintenanceModule {
  static forRuntime(runtime: Runtime): DynamicModule {
    return {
      module: MaintenanceModule,
      imports: [RuntimeModule.forRoot(runtime), ProjectionsModule, ...READ_MODELS],
    };
  }
}

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
