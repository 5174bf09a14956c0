import { canonicalHash } from './canonical-hash';
import { OutputV4 } from './state-document';

/**
 * What makes an output the same output: its value, type and sensitivity
 * (an absent type is null, an absent sensitivity false), by canonical hash.
 */
export function outputHashes(outputs: Record<string, OutputV4>): Map<string, string> {
  const hashes = new Map<string, string>();
  for (const [name, o] of Object.entries(outputs)) {
    hashes.set(
      name,
      canonicalHash({ value: o.value, type: o.type ?? null, sensitive: !!o.sensitive }),
    );
  }
  return hashes;
}

/** Outputs a version changed, by name, like instances: a changed one is closed and opened. */
export interface OutputDelta {
  /** Gone or changed, in the order of `current`. */
  closed: string[];
  /** New or changed, in the order of `next`. */
  opened: string[];
}

export function diffOutputs(
  current: ReadonlyMap<string, string>,
  next: ReadonlyMap<string, string>,
): OutputDelta {
  const closed = [...current].filter(([name, hash]) => next.get(name) !== hash).map(([n]) => n);
  const opened = [...next].filter(([name, hash]) => current.get(name) !== hash).map(([n]) => n);
  return { closed, opened };
}
