import 'reflect-metadata';
import { Reflector } from '@nestjs/core';
import {
  METHOD_METADATA,
  MODULE_METADATA,
  PATH_METADATA,
  ROUTE_ARGS_METADATA,
} from '@nestjs/common/constants';
import { RequestMethod } from '@nestjs/common';
import { RouteParamtypes } from '@nestjs/common/enums/route-paramtypes.enum';
import { ExecutionContext } from '@nestjs/common';
import { ApplyModule } from '../../app/apply.module';
import { ArchiveModule } from '../../app/archive.module';
import { AuthModule } from '../../app/auth.module';
import { DashboardModule } from '../../app/dashboard.module';
import { EventsModule } from '../../app/events.module';
import { OperationsModule } from '../../app/operations.module';
import { QueryModule } from '../../app/query.module';
import { QuotaModule } from '../../app/quota.module';
import { RefreshModule } from '../../app/refresh.module';
import { StateEngineModule } from '../../app/state-engine.module';
import { StateModule } from '../../app/state.module';
import { DomainError } from '../../domain/shared/domain-error';
import { ArchivesController } from './archives.controller';
import { TerraformBackendController } from './terraform-backend.controller';
import { ApplyRunsController } from './apply-runs.controller';
import { UiController } from './ui.controller';
import { queryParametersTaken, PassedOverInputGuard } from './passed-over-input';

type Handler = (...args: never[]) => unknown;

const modules = [
  ApplyModule,
  ArchiveModule,
  AuthModule,
  DashboardModule,
  EventsModule,
  OperationsModule,
  QueryModule,
  QuotaModule,
  RefreshModule,
  StateEngineModule,
  StateModule,
];

/** Every route handler of kld's controllers. */
function routes(): { controller: { name: string; prototype: object }; handler: Handler }[] {
  const found = [];
  for (const m of modules) {
    const controllers = (Reflect.getMetadata(MODULE_METADATA.CONTROLLERS, m) ?? []) as {
      name: string;
      prototype: Record<string, unknown>;
    }[];
    for (const controller of controllers) {
      for (const key of Object.getOwnPropertyNames(controller.prototype)) {
        const handler = controller.prototype[key];
        if (typeof handler !== 'function' || key === 'constructor') continue;
        if (Reflect.getMetadata(PATH_METADATA, handler) === undefined) continue;
        found.push({ controller, handler: handler as Handler });
      }
    }
  }
  return found;
}

function contextOf(
  controller: object,
  handler: Handler,
  query: Record<string, unknown>,
  method = 'GET',
  headers: Record<string, string> = {},
) {
  const req = { method, path: '/x', query, headers, route: { path: '/v1/x/*name' } };
  return {
    getHandler: () => handler,
    getClass: () => controller,
    switchToHttp: () => ({ getRequest: () => req }),
  } as unknown as ExecutionContext;
}

describe('queryParametersTaken', () => {
  it('finds every route, and none reads a whole query string without a DTO', () => {
    const all = routes();
    expect(all.length).toBeGreaterThan(60);
    const untyped = all
      .filter(
        ({ controller, handler }) => queryParametersTaken(controller, handler).kind === 'untyped',
      )
      .map(({ controller, handler }) => `${controller.name}.${handler.name}`);
    expect(untyped).toEqual([]);
  });

  it('finds no GET or DELETE route that takes a body', () => {
    const takingBodies = routes()
      .filter(({ handler }) => {
        const method = Reflect.getMetadata(METHOD_METADATA, handler) as RequestMethod;
        return method === RequestMethod.GET || method === RequestMethod.DELETE;
      })
      .filter(({ controller, handler }) =>
        Object.keys(
          (Reflect.getMetadata(ROUTE_ARGS_METADATA, controller, handler.name) ?? {}) as object,
        ).some((key) => key.split(':')[0] === String(RouteParamtypes.BODY)),
      )
      .map(({ controller, handler }) => `${controller.name}.${handler.name}`);
    expect(takingBodies).toEqual([]);
  });

  it('reads what each handler takes from its own decorators', () => {
    expect(queryParametersTaken(ArchivesController, ArchivesController.prototype.export)).toEqual({
      kind: 'names',
      names: [],
    });
    expect(queryParametersTaken(ArchivesController, ArchivesController.prototype.import)).toEqual({
      kind: 'names',
      names: ['name'],
    });
    expect(
      queryParametersTaken(TerraformBackendController, TerraformBackendController.prototype.get),
    ).toEqual({ kind: 'names', names: ['serial', 'version'] });
    expect(queryParametersTaken(ApplyRunsController, ApplyRunsController.prototype.list)).toEqual({
      kind: 'dto',
    });
  });
});

describe('PassedOverInputGuard', () => {
  const guard = new PassedOverInputGuard(new Reflector());
  const refusal = (
    controller: object,
    handler: Handler,
    query: Record<string, unknown>,
    method?: string,
    headers?: Record<string, string>,
  ) => {
    try {
      guard.canActivate(contextOf(controller, handler, query, method, headers));
      return null;
    } catch (err) {
      expect(err).toBeInstanceOf(DomainError);
      return [(err as DomainError).code, (err as DomainError).message];
    }
  };

  it('refuses a parameter the route would pass over, naming it and what the route takes', () => {
    const exp = ArchivesController.prototype.export;
    expect(refusal(ArchivesController, exp, {})).toBeNull();
    expect(refusal(ArchivesController, exp, { since: '3' })).toEqual([
      'REQUEST.INVALID',
      'GET /v1/x/*name takes no query parameters (got "since")',
    ]);
    const get = TerraformBackendController.prototype.get;
    expect(refusal(TerraformBackendController, get, { version: '2' })).toBeNull();
    expect(refusal(TerraformBackendController, get, { version: '2', Serial: '1' })).toEqual([
      'REQUEST.INVALID',
      'GET /v1/x/*name takes only the query parameters serial, version (got "Serial")',
    ]);
    expect(refusal(ArchivesController, exp, { a: '', b: '', c: '', d: '', e: '' })?.[1]).toContain(
      '(got "a", "b", "c" and 2 more)',
    );
  });

  it('refuses a body sent with a GET or a DELETE, and takes one of length 0', () => {
    const exp = ArchivesController.prototype.export;
    expect(refusal(ArchivesController, exp, {}, 'GET', { 'content-length': '0' })).toBeNull();
    expect(refusal(ArchivesController, exp, {}, 'DELETE', { 'content-length': '12' })).toEqual([
      'REQUEST.INVALID',
      'DELETE /v1/x/*name takes no body: give what it takes in its path or query string',
    ]);
    expect(
      refusal(ArchivesController, exp, {}, 'GET', { 'transfer-encoding': 'chunked' })?.[0],
    ).toBe('REQUEST.INVALID');
    // A POST's body is its route's to read.
    expect(refusal(ArchivesController, exp, {}, 'POST', { 'content-length': '12' })).toBeNull();
  });

  it('leaves a DTO to the ValidationPipe, and a public route (a probe, a dashboard file) alone', () => {
    expect(
      refusal(ApplyRunsController, ApplyRunsController.prototype.list, { anything: '1' }),
    ).toBeNull();
    expect(refusal(UiController, UiController.prototype.asset, { v: '123' })).toBeNull();
  });
});
