import 'reflect-metadata';
// Types only: @nestjs/swagger itself is loaded by the first request for the document (openapi-routes.ts).
import type {
  ApiBodyOptions,
  ApiOperationOptions,
  ApiQueryOptions,
  ApiResponseOptions,
} from '@nestjs/swagger';

/**
 * What the OpenAPI document says of one handler beyond what its route and
 * DTOs say: plain data kept on the handler, which the document builder
 * (openapi.ts) hands to @nestjs/swagger's decorators when it builds the
 * document. Recording it costs nothing at start; @nestjs/swagger is about a
 * fifth of what kld loads, and only `/openapi.json` and `/docs` need it.
 */
export interface OperationDescription extends Omit<ApiOperationOptions, 'responses'> {
  query?: ApiQueryOptions[];
  body?: ApiBodyOptions;
  responses?: ApiResponseOptions[];
}

const OPERATION = Symbol('kilolock:api-operation');
const TAGS = Symbol('kilolock:api-tags');

export const Described = {
  /** The tags of every operation of a controller. */
  tags:
    (...tags: string[]): ClassDecorator =>
    (target) =>
      Reflect.defineMetadata(TAGS, tags, target),
  /** One handler's summary, description, query parameters, body and answers. */
  operation:
    (description: OperationDescription): MethodDecorator =>
    (_target, _key, descriptor) =>
      Reflect.defineMetadata(OPERATION, description, descriptor.value as object),
};

export const describedTags = (controller: object): string[] | undefined =>
  Reflect.getMetadata(TAGS, controller) as string[] | undefined;

export const describedOperation = (handler: object): OperationDescription | undefined =>
  Reflect.getMetadata(OPERATION, handler) as OperationDescription | undefined;
