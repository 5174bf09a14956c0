import { FlatInstance } from './state-instances';

export interface InstanceDelta {
  /** New or changed instances, in the order of the next document. */
  opened: FlatInstance[];
  /** Changed addresses in the order of the next document, then gone ones in the order of `current`. */
  closed: string[];
  unchanged: number;
}

/**
 * What a new document changes, by canonical hash: a changed instance is
 * closed and opened again; an unchanged one is only counted.
 *
 * One lookup per instance of `next` and nothing per unchanged instance
 * beyond it: `current` is walked only when some of its addresses are gone
 * (its size is more than the unchanged and changed ones together), which a
 * commit that only changes and adds instances never pays. `next` holds each
 * address once (flattenInstances of a validated document does); the walk
 * refuses a repeated one.
 */
export function diffInstances(
  current: ReadonlyMap<string, string>,
  next: readonly FlatInstance[],
): InstanceDelta {
  const opened: FlatInstance[] = [];
  const closed: string[] = [];
  for (const i of next) {
    const hash = current.get(i.address);
    if (hash === i.hash) continue;
    opened.push(i);
    if (hash !== undefined) closed.push(i.address);
  }
  const unchanged = next.length - opened.length;
  if (current.size === unchanged + closed.length) return { opened, closed, unchanged };
  const present = new Set<string>();
  for (const i of next) {
    if (present.has(i.address)) throw new Error(`duplicate instance address ${i.address}`);
    present.add(i.address);
  }
  for (const address of current.keys()) if (!present.has(address)) closed.push(address);
  return { opened, closed, unchanged };
}
