import { ValidationPipe } from '@nestjs/common';
import { instanceToPlain, plainToInstance, Transform } from 'class-transformer';
import {
  ValidateBy,
  ValidationArguments,
  ValidationError,
  ValidationOptions,
} from 'class-validator';
import { DomainError } from '../../domain/shared/domain-error';
import { keyProblem, textProblem } from '../../domain/shared/storable-text';
import { isJsonObject } from '../../domain/terraform';
import { stateNameProblem } from './state-name';

/**
 * Request DTOs (bodies and query strings) are checked by class-validator
 * through Nest's ValidationPipe: unknown members are refused, values are
 * converted to the DTO's types, and a refusal is REQUEST.INVALID naming the
 * member (`results[3].outcome must be one of …`).
 */
export function requestValidationPipe(): ValidationPipe {
  return new RequestValidationPipe({
    whitelist: true,
    forbidNonWhitelisted: true,
    transform: true,
    transformerPackage: { plainToInstance: verbatimAware, classToPlain: instanceToPlain },
    exceptionFactory: (errors) => new DomainError('REQUEST.INVALID', describe(errors)),
  });
}

class RequestValidationPipe extends ValidationPipe {
  // A body here is what JSON.parse made (prototype keys are plain own data,
  // never a prototype; class-transformer skips them when it builds a DTO) and
  // holds no sparse array. Walking it whole would delete data from what we
  // store verbatim (a tag named "constructor" in a state document) and cost a
  // pass over documents of hundreds of MB.
  protected override stripProtoKeys(): void {}
  protected override closeArrayGaps(): void {}
}

const MAX_PROBLEMS = 3;

/**
 * One line: the first problems, one per member, each naming the member by
 * its path in the request. Of several broken rules of one member the
 * top-most decorator's is shown (class-validator runs them bottom-up), so a
 * DTO lists the type check first.
 */
export function describe(errors: ValidationError[]): string {
  const problems: string[] = [];
  const visit = (error: ValidationError, parent: string) => {
    if (problems.length >= MAX_PROBLEMS) return;
    const path = /^\d+$/.test(error.property)
      ? `${parent}[${error.property}]`
      : parent === ''
        ? error.property
        : `${parent}.${error.property}`;
    const broken = Object.entries(error.constraints ?? {}).at(-1);
    if (broken !== undefined) {
      const [rule, message] = broken;
      if (rule === 'whitelistValidation') problems.push(`${path} is not a known member`);
      // class-validator starts its messages with the bare member name.
      else if (
        message.startsWith(`${error.property} `) ||
        message.startsWith(`${error.property}[`)
      ) {
        problems.push(path + message.slice(error.property.length));
      } else problems.push(`${path}: ${message}`);
    }
    for (const child of error.children ?? []) visit(child, path);
  };
  for (const error of errors) visit(error, '');
  return problems.length === 0 ? 'the request is not valid' : problems.join('; ');
}

/** Members each DTO class takes verbatim (@Verbatim). */
const VERBATIM = new WeakMap<object, string[]>();

/**
 * A JSON member kept exactly as sent (a state document, a provider config, a
 * schema): class-transformer would copy it, dropping `constructor` keys, and
 * a copy of a big document costs its size again. Validate it with its own
 * decorators (IsJsonObject) or after the pipe.
 */
export function Verbatim(): PropertyDecorator {
  return (target, property) => {
    const members = VERBATIM.get(target.constructor) ?? [];
    VERBATIM.set(target.constructor, [...members, String(property)]);
  };
}

function verbatimMembers(cls: object): string[] {
  const members: string[] = [];
  for (
    let c: object | null = cls;
    c !== null && c !== Function.prototype;
    c = Object.getPrototypeOf(c)
  ) {
    members.push(...(VERBATIM.get(c) ?? []));
  }
  return members;
}

function verbatimAware<T>(cls: new () => T, plain: unknown, options?: object): T {
  const members = verbatimMembers(cls);
  if (members.length === 0 || !isJsonObject(plain)) return plainToInstance(cls, plain, options);
  const rest = { ...plain };
  for (const m of members) delete rest[m];
  const instance = plainToInstance(cls, rest, options) as Record<string, unknown>;
  for (const m of members) if (Object.hasOwn(plain, m)) instance[m] = plain[m];
  return instance as T;
}

/** A member checked by `validate` (null: fine, else what is wrong, after the member's name). */
export function rule(
  name: string,
  validate: (value: unknown) => string | null,
  options?: ValidationOptions,
): PropertyDecorator {
  return ValidateBy(
    {
      name,
      validator: {
        validate: (value: unknown) => validate(value) === null,
        defaultMessage: (args?: ValidationArguments) => {
          const property = args?.property ?? 'value';
          const value: unknown = args?.value;
          // With `each`, the message is asked of the whole array: name the element.
          if (options?.each && Array.isArray(value)) {
            const i = value.findIndex((v) => validate(v) !== null);
            if (i >= 0) return `${property}[${i}] ${validate(value[i])}`;
          }
          return `${property} ${validate(value) ?? 'is not valid'}`;
        },
      },
    },
    options,
  );
}

/**
 * A string PostgreSQL can store as text (no NUL, no unpaired surrogate);
 * `key`: also short enough for an index (at most `key` bytes, or 800).
 */
export function IsStorableText(
  options: { nonEmpty?: boolean; key?: boolean | number } = {},
  validation?: ValidationOptions,
): PropertyDecorator {
  return rule(
    'isStorableText',
    (value) => {
      if (typeof value !== 'string') return 'must be a string';
      if (options.nonEmpty && value.trim() === '') return 'must be a non-empty string';
      if (options.key === undefined || options.key === false) return textProblem(value);
      return options.key === true ? keyProblem(value) : keyProblem(value, options.key);
    },
    validation,
  );
}

/** A state name (`team/prod/network`), as in the URL of its routes. */
export function IsStateName(): PropertyDecorator {
  return rule('isStateName', (value) => {
    if (typeof value !== 'string') return 'must be a state name';
    const problem = stateNameProblem(value);
    return problem === null ? null : `is not a valid state name ${problem}`;
  });
}

/** A JSON object (not an array, not null). */
export function IsJsonObject(): PropertyDecorator {
  return rule('isJsonObject', (value) => (isJsonObject(value) ? null : 'must be a JSON object'));
}

/** The largest version number: versions are PostgreSQL integers (a larger one is none). */
export const MAX_VERSION = 2_147_483_647;

/** A query-string integer: digits only (no sign, exponent or spaces); '' is absent. */
export function QueryInteger(): PropertyDecorator {
  return Transform(({ value }: { value: unknown }) =>
    value === ''
      ? undefined
      : typeof value === 'string' && /^\d{1,15}$/.test(value)
        ? Number(value)
        : value,
  );
}

/** A query-string boolean: `true` or `false`. */
export function QueryBoolean(): PropertyDecorator {
  return Transform(({ value }: { value: unknown }) =>
    value === 'true' ? true : value === 'false' ? false : value,
  );
}
