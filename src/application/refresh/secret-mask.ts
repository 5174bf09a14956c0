import { DomainError } from '../../domain/shared/domain-error';

/**
 * Shorter values are not masked. A value this short is no secret a mask could
 * keep (a few million guesses find it) and it is a common word or number:
 * masking `true`, `1`, `443` or `prod` would wreck every message that merely
 * says them, and the `***` left where they stood would point at the value.
 * Credentials are far longer (an AWS access key id is 20 characters).
 */
export const MIN_MASKED_LENGTH = 6;

export const MASKED = '***';

/**
 * The values a refresh resolved from the environment (`{"env": …}`), and the
 * one way a text leaves the refresh: with each of them replaced by `***`.
 * A provider's own error may repeat what it was configured with ("invalid
 * access key AKIA…", "could not connect to https://user:secret@host"); that
 * text becomes a result's error, the run's summary, kl's output, kld's answer
 * and log, and the events and read models any reader of the state can query.
 *
 * Besides the value itself it masks the forms a provider is likely to echo:
 * JSON-escaped (a diagnostic quoting its config), URL-encoded (a password put
 * into a URL or a query), and each line of a value of several lines (an error
 * cut to its first line keeps only part of a PEM key). Longer forms go first,
 * so a value holding another is masked whole, not around the shorter one.
 */
export class SecretMask {
  /** Longest first. */
  private forms: string[] = [];

  /** Remembers a value handed to a provider. */
  add(value: string): void {
    const lines = value.includes('\n') ? value.split(/\r?\n/).map((l) => l.trim()) : [];
    const candidates = [
      value,
      JSON.stringify(value).slice(1, -1),
      encodeURIComponent(value),
      new URLSearchParams({ v: value }).toString().slice(2),
      ...lines,
    ];
    for (const form of candidates) {
      if (form.length >= MIN_MASKED_LENGTH && !this.forms.includes(form)) this.forms.push(form);
    }
    this.forms.sort((a, b) => b.length - a.length);
  }

  text(text: string): string {
    let out = text;
    for (const form of this.forms) {
      if (out.includes(form)) out = out.split(form).join(MASKED);
    }
    return out;
  }

  /**
   * The error to rethrow: itself when nothing in it (message, stack, metadata,
   * causes) holds a value, else an error of the same code with the message
   * masked and nothing else, since a metadata or a cause may repeat the value.
   */
  error(e: unknown): unknown {
    if (this.forms.length === 0 || !this.holds(e, 0)) return e;
    const message = this.text(e instanceof Error ? e.message : String(e));
    return e instanceof DomainError ? new DomainError(e.code, message) : new Error(message);
  }

  private holds(e: unknown, depth: number): boolean {
    if (depth > 8) return true;
    if (!(e instanceof Error)) return this.reveals(String(e));
    const metadata = e instanceof DomainError ? e.metadata : {};
    let json: string;
    try {
      json = JSON.stringify(metadata) ?? '';
    } catch {
      return true; // cannot be told: treated as holding one
    }
    return (
      this.reveals(e.message) ||
      this.reveals(e.stack ?? '') ||
      this.reveals(json) ||
      (e.cause !== undefined && this.holds(e.cause, depth + 1))
    );
  }

  private reveals(text: string): boolean {
    return this.forms.some((form) => text.includes(form));
  }
}
