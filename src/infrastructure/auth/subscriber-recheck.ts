/**
 * How often a long-lived event subscription asks again whether its
 * credentials still hold. Authentication happens when a stream opens; a
 * token revoked or expired afterwards must stop getting events too, not
 * only new requests (docs/security.md, "Revocation").
 */
export const RECHECK_MS = 1_000;

/**
 * Re-runs `check` (the transport's authentication of the subscriber) before
 * a message goes out, at most once per `everyMs`: a catch-up of thousands of
 * messages costs one token lookup a second, not one per message. `check`
 * throws the refusal (AUTH.UNAUTHENTICATED), which ends the stream.
 */
export class SubscriberRecheck {
  private checkedAt: number;

  constructor(
    private readonly check: () => Promise<unknown>,
    private readonly now: () => number = Date.now,
    private readonly everyMs = RECHECK_MS,
  ) {
    this.checkedAt = now();
  }

  async beforeSend(): Promise<void> {
    if (this.now() - this.checkedAt < this.everyMs) return;
    await this.check();
    this.checkedAt = this.now();
  }
}
