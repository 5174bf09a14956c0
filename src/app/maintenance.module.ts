import { DynamicModule, Module, Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { NestLogger } from '../infrastructure/logging/nest-logger';
import { ProjectionRunner } from '../projections/projection-runner';
import { ApplyProjectionsModule } from './apply-projections.module';
import { AuthProjectionsModule } from './auth-projections.module';
import { ProjectionsModule } from './projections.module';
import { QuotaProjectionsModule } from './quota-projections.module';
import { RefreshProjectionsModule } from './refresh-projections.module';
import { Runtime, RuntimeModule } from './runtime.module';
import { StateProjectionsModule } from './state-projections.module';

/** Every slice's read models: what `kld projections …` loads, with nothing served. */
export const READ_MODELS: readonly Type[] = [
  StateProjectionsModule,
  RefreshProjectionsModule,
  ApplyProjectionsModule,
  AuthProjectionsModule,
  QuotaProjectionsModule,
];

/**
 * kld's maintenance commands (`kld projections rebuild|skip`): the
 * projection runner with every read model, and no controllers, command
 * handlers or background work. Apart from kilolock.module.ts so that these
 * commands do not load the slices kld serves.
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

/**
 * The projection runner with every read model registered, started on
 * nothing: for maintenance (rebuild, skip) in a process that serves nothing.
 */
export async function openMaintenance(
  runtime: Runtime,
): Promise<{ runner: ProjectionRunner; close(): Promise<void> }> {
  const context = await NestFactory.createApplicationContext(
    MaintenanceModule.forRuntime(runtime),
    { logger: new NestLogger(runtime.logger), abortOnError: false },
  );
  return { runner: context.get(ProjectionRunner), close: () => context.close() };
}
