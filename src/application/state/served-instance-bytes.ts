import {
  instanceDigest,
  InstanceEncoding,
  InstanceObjectV4,
  instanceObjectText,
} from '../../domain/terraform';

interface Encoded {
  bytes: Buffer;
  digest: Buffer;
}

// A warming slice gives the event loop back after about this long, so the
// append's COPY stream and the answers of other requests wait at most that.
const SLICE_MS = 4;

/**
 * Each instance object as a served document spells it (UTF-8) and the
 * digest chunking names it by, kept while the object lives. The raw-state
 * projector reads them (a commit serialises only the instances it opened:
 * cached documents keep their objects from commit to commit); the commit
 * handler warms them for the instances it has just parsed, in slices, while
 * the append waits for PostgreSQL, so that a first commit's 20,000
 * encodings are not made in one run on the projector's turn, where they
 * held up every other projector's rows. A pure function of the object,
 * computed at most once whoever asks first.
 */
export class ServedInstanceBytes {
  private readonly encoded = new WeakMap<InstanceObjectV4, Encoded>();
  /** Instances encoded so far (for tests). */
  made = 0;

  private of(instance: InstanceObjectV4): Encoded {
    let e = this.encoded.get(instance);
    if (e === undefined) {
      const bytes = Buffer.from(instanceObjectText(instance), 'utf8');
      // Both in Node's shared pool (instanceDigest's too): no ArrayBuffer
      // and memory of their own apiece, 20,000 of them kept through a first
      // commit's young collections.
      e = { bytes, digest: instanceDigest(bytes) };
      this.encoded.set(instance, e);
      this.made++;
    }
    return e;
  }

  readonly encoding: InstanceEncoding = {
    bytes: (instance) => this.of(instance).bytes,
    digest: (instance) => this.of(instance).digest,
  };

  /**
   * Encodes `instances` a slice per turn of the event loop (setImmediate:
   * after the I/O of that turn); `stop` ends it early (a refused commit).
   */
  warm(instances: readonly InstanceObjectV4[]): { stop(): void } {
    let next = 0;
    let timer: NodeJS.Immediate | undefined;
    const slice = () => {
      const until = performance.now() + SLICE_MS;
      while (next < instances.length) {
        this.of(instances[next++]);
        if ((next & 63) === 0 && performance.now() >= until) break;
      }
      timer = next < instances.length ? setImmediate(slice) : undefined;
    };
    if (instances.length > 0) timer = setImmediate(slice);
    return {
      stop: () => {
        if (timer !== undefined) clearImmediate(timer);
        timer = undefined;
      },
    };
  }
}
