import { FlatInstance } from './state-instances';

export interface InstanceDelta {
  /** New or changed instances, in the order of the next document. */
  opened: FlatInstance[];
  /** Gone or changed addresses, in the order of `current`. */
  closed: string[];
  unchanged: number;
}

/**
 * What a new document changes, by canonical hash: a changed instance is
 * closed and opened again; an unchanged one is only counted.
 */
export function diffInstances(
  current: ReadonlyMap<string, string>,
  next: readonly FlatInstance[],
): InstanceDelta {
  const nextHashes = new Map<string, string>();
  for (const i of next) {
    if (nextHashes.has(i.address)) throw new Error(`duplicate instance address ${i.address}`);
    nextHashes.set(i.address, i.hash);
  }
  const closed: string[] = [];
  for (const [address, hash] of current) {
    if (nextHashes.get(address) !== hash) closed.push(address);
  }
  const opened = next.filter((i) => current.get(i.address) !== i.hash);
  return { opened, closed, unchanged: next.length - opened.length };
}
