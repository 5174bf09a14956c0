import { Transform } from 'class-transformer';
import { IsArray, IsBoolean, IsInt, IsOptional, IsString, Max, Min } from 'class-validator';
import { QueryInteger } from '../request-validation';

const between = (min: number, max: number) => ({
  message: `$property must be a whole number from ${min} to ${max}`,
});

/** Repeated (`type=A&type=B`) or comma-separated (`type=A,B`); the filter checks each value. */
function QueryList(): PropertyDecorator {
  return Transform(({ value }: { value: unknown }) => {
    const items = Array.isArray(value) ? value : [value];
    if (!items.every((v) => typeof v === 'string')) return value;
    return (items as string[]).flatMap((v) => v.split(',')).map((v) => v.trim());
  });
}

/** `true`/`false`, or `1`/`0` as EventSource users write them. */
function QueryFlag(): PropertyDecorator {
  return Transform(({ value }: { value: unknown }) =>
    value === 'true' || value === '1' ? true : value === 'false' || value === '0' ? false : value,
  );
}

/** `GET /v1/events` (SSE); see docs/events.md. */
export class EventsQueryDto {
  /** A position, `end`, or empty for the start; Last-Event-ID when absent. */
  @IsOptional()
  @IsString({ message: '$property may be given once' })
  from?: string;

  @IsOptional()
  @QueryList()
  @IsArray()
  @IsString({ each: true, message: '$property must be text' })
  state?: string[];

  @IsOptional()
  @QueryList()
  @IsArray()
  @IsString({ each: true, message: '$property must be text' })
  type?: string[];

  @IsOptional()
  @QueryList()
  @IsArray()
  @IsString({ each: true, message: '$property must be text' })
  stream?: string[];

  @IsOptional()
  @QueryFlag()
  @IsBoolean({ message: '$property must be true or false' })
  follow?: boolean;

  @IsOptional()
  @QueryInteger()
  @IsInt(between(1, 1_000_000_000))
  @Min(1, between(1, 1_000_000_000))
  @Max(1_000_000_000, between(1, 1_000_000_000))
  limit?: number;

  @IsOptional()
  @QueryInteger()
  @IsInt(between(100, 3_600_000))
  @Min(100, between(100, 3_600_000))
  @Max(3_600_000, between(100, 3_600_000))
  checkpoint_ms?: number;

  @IsOptional()
  @QueryInteger()
  @IsInt(between(1, 300))
  @Min(1, between(1, 300))
  @Max(300, between(1, 300))
  heartbeat?: number;
}
