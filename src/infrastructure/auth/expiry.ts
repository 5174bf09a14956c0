import { DomainError } from '../../domain/shared/domain-error';
import { TOKEN_INVALID } from '../../domain/auth';
import { ConfigError, parseDuration } from '../config/config';

/**
 * `--expires`: a duration from now (`90d`, `12h`) or a date/time
 * (`2027-01-31`, `2027-01-31T12:00:00Z`), as an ISO timestamp.
 */
export function expiryFrom(value: string, now: Date): string {
  const text = value.trim();
  if (/^\d{4}-\d{2}-\d{2}([T ][\d:.]+(Z|[+-]\d{2}:?\d{2})?)?$/.test(text)) {
    const at = Date.parse(text.length === 10 ? `${text}T00:00:00Z` : text);
    if (!Number.isNaN(at)) return new Date(at).toISOString();
  } else {
    try {
      return new Date(now.getTime() + parseDuration(text, 'expires')).toISOString();
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
    }
  }
  throw new DomainError(
    TOKEN_INVALID,
    `expiry "${text.slice(0, 60)}" is neither a duration (90d, 12h) nor a date (2027-01-31)`,
  );
}
