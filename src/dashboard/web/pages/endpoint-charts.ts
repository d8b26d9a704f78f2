import { useEffect, useMemo, useState } from 'preact/hooks';
import { api, apiError } from '../shared/api.ts';
import { TimeChart, type ChartSeries } from '../shared/chart.ts';
import { html } from '../shared/html.ts';
import type { Agent, EndpointHealth, EndpointSeries } from '../shared/types.ts';

// One endpoint's last day, five minutes at a time, on its health detail: how long its attempts
// took (mean and slowest, exact) and how many failed. The time axis spans the windows that exist,
// up to now, so that an endpoint tried for an hour fills the chart with that hour.

const HOURS = 24;
const whole = new Intl.NumberFormat();

// Every window from the first with attempts to the current one, in Unix seconds: a window without
// attempts is a zero on the failures chart and a gap on the latency chart.
function timeline(series: EndpointSeries): { times: number[]; at: Map<number, number> } {
  const step = series.windowMinutes * 60;
  const first = Date.parse(series.windows[0]!.at) / 1000;
  const now = Math.floor(Date.now() / 1000 / step) * step;
  const last = Math.max(now, Date.parse(series.windows.at(-1)!.at) / 1000);
  const times: number[] = [];
  for (let t = first; t <= last; t += step) times.push(t);
  return { times, at: new Map(series.windows.map((w, i) => [Date.parse(w.at) / 1000, i])) };
}

export function EndpointCharts({ agent, health }: { agent: Agent; health: EndpointHealth }) {
  const [series, setSeries] = useState<EndpointSeries | null>(null);
  const [error, setError] = useState<string | null>(null);
  // Read again as the endpoint's figures move (the Agents list is read again on its live events).
  const seen = `${health.lastDay.attempts}:${health.lastFailureAt}:${health.lastSuccessAt}`;
  useEffect(() => {
    api<EndpointSeries>('GET', `/agents/${encodeURIComponent(agent.username)}/webhook/series?hours=${HOURS}`)
      .then((s) => {
        setSeries(s);
        setError(null);
      })
      .catch((e) => setError(apiError(e).message));
  }, [agent.username, seen]);

  const charts = useMemo(() => {
    if (!series || series.windows.length === 0) return null;
    const { times, at } = timeline(series);
    const pick = (f: (i: number) => number | null, empty: number | null) => times.map((t) => (at.has(t) ? f(at.get(t)!) : empty));
    const w = series.windows;
    const attempts = w.reduce((n, x) => n + x.attempts, 0);
    const failures = w.reduce((n, x) => n + x.failures, 0);
    const timed = w.filter((x) => x.meanMs != null);
    const slowest = timed.length ? Math.max(...timed.map((x) => x.maxMs ?? 0)) : null;
    // Pointing at no time, the legend reads the charted span's figures: the counts' totals (the
    // chart's default), the day's exact mean and the slowest of all.
    const latency: ChartSeries[] = [
      { label: 'Mean', color: 'var(--accent)', values: pick((i) => w[i]!.meanMs, null), overall: health.lastDay.meanMs },
      { label: 'Slowest', color: 'var(--warn)', values: pick((i) => w[i]!.maxMs, null), overall: slowest },
    ];
    const outcomes: ChartSeries[] = [
      { label: 'Answered 2xx', color: 'var(--good)', values: pick((i) => w[i]!.successes, 0) },
      { label: 'Failed', color: 'var(--bad)', values: pick((i) => w[i]!.failures, 0) },
    ];
    return { times, latency, outcomes, attempts, failures };
  }, [series, health.lastDay.meanMs]);

  if (error) return html`<p class="hint" role="status">Could not load the charts: ${error}</p>`;
  if (!series) return null;
  if (!charts) return html`<p class="hint" data-endpoint-charts>No attempts in the last ${HOURS} hours to chart.</p>`;
  return html`<div class="charts endpoint-charts" data-endpoint-charts>
    <section class="chart-card" aria-label=${`Attempts at ${agent.username}'s webhook`}>
      <h5>Attempts per ${series.windowMinutes} minutes, by answer</h5>
      <${TimeChart} title=${`Attempts at ${agent.username}'s webhook per ${series.windowMinutes} minutes, answered 2xx and failed`}
        series=${charts.outcomes} times=${charts.times} unit="deliveries" stacked height=${160} overallLabel=${`${whole.format(charts.attempts)} attempts`} />
    </section>
    <section class="chart-card" aria-label=${`How long ${agent.username}'s webhook took`}>
      <h5>How long each took, per ${series.windowMinutes} minutes</h5>
      <${TimeChart} title=${`How long attempts at ${agent.username}'s webhook took per ${series.windowMinutes} minutes, mean and slowest`}
        series=${charts.latency} times=${charts.times} unit="ms" height=${160} overallLabel="Last day" />
    </section>
  </div>`;
}
