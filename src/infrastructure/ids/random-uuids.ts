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
 */
export class RandomUuids implements Ids {
  private readonly random = Buffer.alloc(16 * BATCH);
  private readonly text = Buffer.alloc(36 * BATCH);
  private next = BATCH;

  uuid(): string {
    if (this.next === BATCH) this.refill();
    const at = 36 * this.next++;
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
        case 6: // the version, 4
          text[at++] = DASH;
          byte = (byte & 0x0f) | 0x40;
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
