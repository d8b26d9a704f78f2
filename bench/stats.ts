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
