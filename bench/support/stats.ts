/** Summary of a sample of durations in milliseconds. */
export interface Distribution {
  count: number;
  min: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

/** Nearest-rank percentiles: every figure reported is a value actually observed. */
export function distribution(samples: readonly number[]): Distribution {
  if (samples.length === 0) return { count: 0, min: NaN, p50: NaN, p90: NaN, p99: NaN, max: NaN };
  const sorted = Float64Array.from(samples).sort();
  const at = (p: number) => sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)];
  return {
    count: sorted.length,
    min: sorted[0],
    p50: at(50),
    p90: at(90),
    p99: at(99),
    max: sorted[sorted.length - 1],
  };
}

/** The nearest-rank median: a value actually observed (the lower of the two middle ones). */
export function median(samples: readonly number[]): number {
  return distribution(samples).p50;
}

export function formatInt(n: number): string {
  return Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '-';
}

export function formatMs(n: number): string {
  if (!Number.isFinite(n)) return '-';
  return n < 10 ? n.toFixed(2) : n < 100 ? n.toFixed(1) : n.toFixed(0);
}

export function verdict(pass: boolean): string {
  return pass ? 'PASS' : 'MISS';
}
