import { DynamicModule, Module, Type } from '@nestjs/common';
import { CqrsModule } from '@nestjs/cqrs';
import { ApplyModule } from './apply.module';
import { ArchiveModule } from './archive.module';
import { EventsModule } from './events.module';
import { DashboardModule } from './dashboard.module';
import { AuthModule } from './auth.module';
import { OperationsModule } from './operations.module';
import { QueryModule } from './query.module';
import { QuotaModule } from './quota.module';
import { RefreshModule } from './refresh.module';
import { Runtime, RuntimeModule } from './runtime.module';
import { StateEngineModule } from './state-engine.module';
import { StateModule } from './state.module';

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
