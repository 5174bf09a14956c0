import { randomFillSync } from 'node:crypto';
import type { Ids } from '../../application/ports/clock.port';

/** Ids spelled per refill of the random bytes. */
const BATCH = 256;
const HEX = Buffer.from('0123456789abcdef', 'latin1');
const DASH = 0x2d;

/**
 * Random (version 4) UUIDs, as `crypto.randomUUID` makes them, each one
 * flat string. A first commit takes an event id per instance, 20,000 of
 * them: `randomUUID` (and the `uuid` package, which hands off to it or
 * concatenates the same way) spells each by concatenating two-digit pieces,
 * a rope of a dozen string objects that lives through the append's young
 * collections and is flattened again by the event store's id check. Here a
 * batch of ids is written as ASCII into one buffer, from one fill of random
 * bytes from the same generator, and each id is cut out of it as a string.
 *
 * With `timeOrdered`, version 7 instead: the first 48 bits are the time of
 * the id in milliseconds, the other 74 random as in version 4. For event
 * ids: the log's unique index on them (kl_events_event_id) then takes a
 * commit's ids at its right edge, as it takes positions, instead of on every
 * leaf page of a long log, each page the first time it is written after a
 * checkpoint a full 8 KiB image in the WAL (docs/performance-history.md,
 * "The WAL of a big commit (wave 26)").
 */
export class RandomUuids implements Ids {
  private readonly random = Buffer.alloc(16 * BATCH);
  private readonly text = Buffer.alloc(36 * BATCH);
  private next = BATCH;
  private readonly version: number;

  constructor(options: { timeOrdered?: boolean } = {}) {
    this.version = options.timeOrdered ? 7 : 4;
  }

  uuid(): string {
    if (this.next === BATCH) this.refill();
    const at = 36 * this.next++;
    if (this.version === 7) writeMillis(this.text, at, Date.now());
    return this.text.toString('latin1', at, at + 36);
  }

  private refill(): void {
    const { random, text } = this;
    randomFillSync(random);
    let at = 0;
    for (let b = 0; b < random.length; b++) {
      let byte = random[b];
      switch (b & 15) {
        case 4:
        case 10:
          text[at++] = DASH;
          break;
        case 6: // the version
          text[at++] = DASH;
          byte = (byte & 0x0f) | (this.version << 4);
          break;
        case 8: // the variant, 10xx
          text[at++] = DASH;
          byte = (byte & 0x3f) | 0x80;
          break;
      }
      text[at++] = HEX[byte >> 4];
      text[at++] = HEX[byte & 15];
    }
    this.next = 0;
  }
}

/** The 48-bit time as the 12 hex digits around the first dash (tttttttt-tttt-7…). */
function writeMillis(text: Buffer, at: number, millis: number): void {
  let t = millis;
  for (let k = 12; k >= 0; k--) {
    if (k === 8) continue;
    text[at + k] = HEX[t % 16];
    t = Math.floor(t / 16);
  }
}
