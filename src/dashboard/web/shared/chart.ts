import { useEffect, useMemo, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import { html } from './html.ts';

// A chart over time, drawn by uPlot (vendored, served under its version: src/dashboard/pages.ts; a
// page that shows one links uPlot's stylesheet there). The canvas is for the eye only, hidden from
// assistive technology: the same figures are in a table under it, folded in a <details>, which
// anyone can open (a keyboard has no way to hover the plot for its values).

export type ChartSeries = {
  label: string;
  // Any CSS colour, or a colour of the dashboard's stylesheet as `var(--good)` (read from the page,
  // as a canvas knows no CSS variables): `var(--good)` delivered, `var(--bad)` failed, `var(--warn)`
  // retrying or stalled, `var(--accent)` and `var(--muted)` for the rest.
  color: string;
  // One per entry of `times`; null where there is no figure (a gap, not a zero).
  values: (number | null)[];
  // What the legend shows beside the series while no time is pointed at: by default the total of
  // its counts; a figure over all times for anything else (a percentile of all, say).
  overall?: number | null;
};

export type ChartUnit = 'deliveries' | 'ms';

export type TimeChartProps = {
  // The chart's accessible name (and its table's caption).
  title: string;
  series: ChartSeries[];
  // Unix seconds, ascending.
  times: number[];
  unit: ChartUnit;
  // Counts stacked as bars, one on another, rather than lines over each other.
  stacked?: boolean;
  // The plot's height in CSS pixels, axes included and the legend not.
  height?: number;
  // What the legend's time reads while no time is pointed at (its series then show `overall`).
  overallLabel?: string;
};

const MINUTE = 60;
const DAY = 86_400;
// Tick spacings on the time axis: whole minutes and up, as its labels read hh:mm.
const TIME_INCRS = [1, 5, 10, 15, 30, 60, 120, 180, 360, 720].map((m) => m * MINUTE).concat([1, 2, 7, 14, 28].map((d) => d * DAY));
// Tick spacings for counts: whole numbers only.
const COUNT_INCRS = Array.from({ length: 10 }, (_, power) => [1, 2, 5].map((m) => m * 10 ** power)).flat();

const clock = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });
const day = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric' });
const moment = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });
const whole = new Intl.NumberFormat(undefined, { maximumFractionDigits: 0 });
const compact = new Intl.NumberFormat(undefined, { notation: 'compact', maximumFractionDigits: 1 });
const fine = new Intl.NumberFormat(undefined, { maximumFractionDigits: 1 });

const dateOf = (seconds: number) => new Date(seconds * 1000);

// A figure as the legend and the table show it.
function figure(value: number | null | undefined, unit: ChartUnit): string {
  if (value == null) return '–';
  return unit === 'ms' ? `${fine.format(value)} ms` : whole.format(value);
}

// A series' figure over all its times: its own, or the total of its counts.
function overallOf(s: ChartSeries, unit: ChartUnit): number | null {
  if (s.overall !== undefined) return s.overall;
  if (unit !== 'deliveries') return null;
  return s.values.reduce<number>((sum, v) => sum + (v ?? 0), 0);
}

// A table cell's figure: a gap is read as one, not as a dash.
const cell = (value: number | null | undefined, unit: ChartUnit) =>
  html`<td>${value == null ? html`<span aria-hidden="true">–</span><span class="sr">no figure</span>` : figure(value, unit)}</td>`;

// A value on the vertical axis: short, so that the axis stays narrow.
function tick(value: number, unit: ChartUnit): string {
  if (unit === 'deliveries') return compact.format(value);
  return value >= 1000 ? `${fine.format(value / 1000)} s` : `${fine.format(value)} ms`;
}

// hh:mm under each tick, with the day under the first and wherever the day changes (the day alone
// when ticks are days apart).
function timeTicks(_u: uPlot, splits: number[], _axis: number, _space: number, incr: number): string[] {
  let previous = '';
  return splits.map((split) => {
    const at = dateOf(split);
    const date = day.format(at);
    const label = incr >= DAY ? date : date === previous ? clock.format(at) : `${clock.format(at)}\n${date}`;
    previous = date;
    return label;
  });
}

// A colour the canvas can use: `var(--name)` is looked up on the element (so in the stylesheet).
function resolve(color: string, el: Element): string {
  const variable = /^var\((--[\w-]+)\)$/.exec(color.trim());
  return variable ? getComputedStyle(el).getPropertyValue(variable[1]!).trim() || color : color;
}

// What uPlot draws: stacked, each series is drawn from the sum of those before it up to that sum
// plus its own (a gap stays a gap, and adds nothing to the stack).
function plotData(times: number[], series: ChartSeries[], stacked: boolean): uPlot.AlignedData {
  if (!stacked) return [times, ...series.map((s) => s.values)];
  const sums: (number | null)[] = times.map(() => null);
  return [
    times,
    ...series.map((s) =>
      times.map((_, i) => {
        const value = s.values[i];
        if (value != null) sums[i] = (sums[i] ?? 0) + value;
        return sums[i] ?? null;
      }),
    ),
  ];
}

function options(props: TimeChartProps, el: HTMLElement, width: number, latest: { current: TimeChartProps }): uPlot.Options {
  const { unit, stacked = false, height = 200 } = props;
  const muted = resolve('var(--muted)', el);
  const line = resolve('var(--line)', el);
  const font = '12px system-ui, -apple-system, "Segoe UI", Roboto, sans-serif';
  const axis = { stroke: muted, font, grid: { stroke: line, width: 1 }, ticks: { stroke: line, width: 1, size: 4 } };
  // The legend shows a series' own figure, not its top in the stack, read from the props as they
  // are now (the data is replaced without building the plot again); pointing at no time, its
  // figure over all times, so that it reads without hovering.
  const own = (_u: uPlot, _raw: number | null, index: number, at: number | null) => {
    const s = latest.current.series[index - 1];
    if (!s) return '–';
    return figure(at == null ? overallOf(s, latest.current.unit) : s.values[at], latest.current.unit);
  };
  const bars = uPlot.paths.bars?.({ size: [0.8, 48], align: 0 });
  return {
    width,
    height,
    series: [
      {
        label: 'Time',
        value: (_u, raw, _index, at) => (at == null || raw == null ? (latest.current.overallLabel ?? 'In all') : moment.format(dateOf(raw))),
      },
      ...props.series.map((s): uPlot.Series => {
        const color = resolve(s.color, el);
        return stacked
          ? { label: s.label, stroke: color, fill: color, width: 0, paths: bars, points: { show: false }, value: own }
          : // A figure between two gaps has no line to show it: every figure gets its point.
            { label: s.label, stroke: color, width: 2, value: own, points: { show: true, size: 6, fill: color } };
      }),
    ],
    // Each bar of a stack stands on the one before it.
    bands: stacked ? props.series.slice(1).map((_, i) => ({ series: [i + 2, i + 1] as [number, number] })) : [],
    scales: {
      x: {
        time: true,
        // Half a step's room more on either side, so that no bar or point at an end is cut, and
        // two charts over the same times line up.
        range: (_u: uPlot, min: number, max: number): uPlot.Range.MinMax => {
          const count = latest.current.times.length;
          const half = (count > 1 ? (max - min) / (count - 1) : MINUTE) / 2;
          return [min - half, max + half];
        },
      },
      // From zero, to a round figure above the highest (ten with no figures at all).
      y: { range: (_u, _min, max) => [0, max > 0 ? (uPlot.rangeNum(0, max, 0.1, true)[1] ?? max) : 10] },
    },
    axes: [
      { ...axis, space: 64, size: 56, incrs: TIME_INCRS, values: timeTicks },
      {
        ...axis,
        space: 32,
        size: unit === 'ms' ? 64 : 48,
        ...(unit === 'deliveries' && { incrs: COUNT_INCRS }),
        values: (_u, splits) => splits.map((v) => tick(v, unit)),
      },
    ],
    // Pointing reads values off the legend; dragging does not zoom (the table below shows it all).
    cursor: { drag: { x: false, y: false }, points: { show: !stacked } },
    legend: { live: true },
  };
}

// A uPlot chart the width of its container, drawn again as that width changes, with the figures in
// a table for anyone who does not see the canvas. The plot is built again when the series or units
// change, and given the new figures otherwise.
export function TimeChart(props: TimeChartProps) {
  const { title, series, times, unit, stacked = false, height = 200 } = props;
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const latest = useRef(props);
  latest.current = props;
  const data = useMemo(() => plotData(times, series, stacked), [times, series, stacked]);
  const drawn = useRef(data);
  const shape = JSON.stringify([unit, stacked, height, series.map((s) => [s.label, s.color])]);

  useEffect(() => {
    const el = box.current!;
    const made = new uPlot(options(props, el, Math.max(el.clientWidth, 240), latest), data, el);
    plot.current = made;
    drawn.current = data;
    const resized = new ResizeObserver(([entry]) => {
      const width = Math.floor(entry?.contentRect.width ?? 0);
      if (width > 0 && width !== made.width) made.setSize({ width, height });
    });
    resized.observe(el);
    return () => {
      resized.disconnect();
      made.destroy();
      plot.current = null;
    };
  }, [shape]);

  useEffect(() => {
    if (!plot.current || drawn.current === data) return;
    plot.current.setData(data);
    drawn.current = data;
  }, [data]);

  const total = (i: number) => {
    const known = series.map((s) => s.values[i]).filter((v): v is number => v != null);
    return known.length ? known.reduce((a, b) => a + b, 0) : null;
  };
  return html`<figure class="chart" aria-label=${title}>
    <div class="chart-plot" ref=${box} aria-hidden="true"></div>
    <details class="chart-figures">
      <summary>Figures as a table<span class="sr">: ${title}</span></summary>
      <div class="chart-table" tabindex="0" role="group" aria-label=${`${title}: figures`}>
        <table>
          <caption>${title}</caption>
          <thead>
            <tr>
              <th scope="col">Time</th>
              ${series.map((s) => html`<th scope="col">${s.label}</th>`)}
              ${stacked ? html`<th scope="col">Total</th>` : null}
            </tr>
          </thead>
          <tbody>
            ${times.map(
              (t, i) => html`<tr>
                <th scope="row"><time datetime=${dateOf(t).toISOString()} title=${moment.format(dateOf(t))}>${clock.format(dateOf(t))}${i === 0 || day.format(dateOf(t)) !== day.format(dateOf(times[i - 1]!))
                  ? html`<span class="day">${day.format(dateOf(t))}</span>`
                  : null}</time></th>
                ${series.map((s) => cell(s.values[i], unit))}
                ${stacked ? cell(total(i), unit) : null}
              </tr>`,
            )}
          </tbody>
          <tfoot>
            <tr>
              <th scope="row">${props.overallLabel ?? 'In all'}</th>
              ${series.map((s) => cell(overallOf(s, unit), unit))}
              ${stacked ? cell(series.reduce((sum, s) => sum + (overallOf(s, unit) ?? 0), 0), unit) : null}
            </tr>
          </tfoot>
        </table>
      </div>
    </details>
  </figure>`;
}
