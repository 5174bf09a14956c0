/**
 * `compute`, remembering its last argument (by identity) and its answer.
 * For a value asked of one object many times in a row: a commit's instances
 * of one resource come one after another and share their descriptor, so a
 * first commit of 20,000 instances computes a handful of answers, not 20,000.
 * One entry, so it never grows (objects read back from events are one per
 * event, and a map of them would only fill). The argument must not change
 * once made, as descriptors and accepted documents never do.
 */
export function rememberingLast<K extends object, V>(compute: (key: K) => V): (key: K) => V {
  let last: { key: K; value: V } | undefined;
  return (key) => {
    if (last?.key !== key) last = { key, value: compute(key) };
    return last.value;
  };
}
