import { IsInt, IsString, Max, Min } from 'class-validator';
import { IsStorableText } from '../request-validation';

/** `POST /v1/admin/projections/skip`: a projector passes over one event from now on. */
export class SkipEventDto {
  @IsString()
  projector!: string;

  /** `event_log.position` */
  @IsInt()
  @Min(1)
  @Max(Number.MAX_SAFE_INTEGER)
  position!: number;

  /** Why the event is skipped: kept with the skip. */
  @IsStorableText({ nonEmpty: true })
  reason!: string;
}
