// Nearest-rank percentile: the smallest sample with at least p % of the samples at or below it.
export function percentile(samples: number[], p: number): number {
  if (samples.length === 0) return NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

export const median = (values: number[]) => percentile(values, 50);

export const round = (n: number, digits = 2) => Number(n.toFixed(digits));

// One run's latency figures, in milliseconds.
export const latencySummary = (samples: number[]) => ({
  n: samples.length,
  p50: round(percentile(samples, 50)),
  p99: round(percentile(samples, 99)),
});

// The median of a figure over its runs: with an even number of runs, the mean of the middle two
// (nearest rank would always report the lower of two runs).
export function medianOfRuns(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const half = sorted.length / 2;
  return Number.isInteger(half) ? (sorted[half - 1]! + sorted[half]!) / 2 : sorted[Math.floor(half)]!;
}

// A figure over its runs: the median, and the smallest and largest run.
export const spread = (values: number[]) => ({ min: Math.min(...values), median: medianOfRuns(values), max: Math.max(...values) });

// Whether every run was worse than the one before it (three runs at least, so that two noisy runs
// do not make a trend): something the runs leave behind is slowing the next ones.
export function drifts(values: number[], worse: 'higher' | 'lower'): boolean {
  if (values.length < 3) return false;
  return values.every((v, i) => i === 0 || (worse === 'higher' ? v > values[i - 1]! : v < values[i - 1]!));
}
