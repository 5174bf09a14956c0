import type { Logger } from '../logging/logger';
import { DomainError } from '../../domain/shared/domain-error';
import { isDatabaseUnavailable } from '../postgres/database-unavailable';

/**
 * Says why an answer whose first bytes were out was cut off: its caller sees
 * only a broken answer, so the log is the one place the reason is kept. A
 * refusal, or a database gone, is no bug (a warning); anything else is one,
 * logged with its stack.
 */
export function logAnswerCutOff(logger: Logger, err: unknown, requestId: string | undefined): void {
  if (err instanceof DomainError || isDatabaseUnavailable(err)) {
    const message = String((err as { message?: unknown }).message);
    logger.warn({ err: { message }, requestId }, 'answer cut off after it began');
  } else {
    logger.error({ err, requestId }, 'answer cut off after it began');
  }
}
