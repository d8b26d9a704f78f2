import type { Sql } from '../../db/connect';
import { invalid, notFound } from '../shared/errors';
import { HEALTH_WINDOW_MINUTES } from './endpoint-health';

// One endpoint's attempts window by window, for the charts of its health detail: exact counts, and
// the mean and max of the windows' durations (the sums kept beside each window's histogram), five
// minutes at a time, or by the hour over a longer span.

// Windows are kept two days (retention.ts).
export const SERIES_MAX_HOURS = 48;

export type EndpointWindow = {
  at: string;
  attempts: number;
  successes: number;
  failures: number;
  // Over the attempts this release timed (all but, during an upgrade, a few the previous one recorded).
  meanMs: number | null;
  maxMs: number | null;
};

export type EndpointSeries = {
  username: string;
  // 5, or 60 when the windows with attempts span more than FINE_SPAN_HOURS.
  windowMinutes: number;
  hours: number;
  // The start of the period asked for; windows begin at or after it.
  since: string;
  // Only windows with attempts, oldest first: a chart spans what exists rather than the whole period.
  windows: EndpointWindow[];
};

export function seriesHours(raw: unknown): number {
  if (raw === undefined || raw === '') return 24;
  const hours = Number(raw);
  if (!Number.isInteger(hours) || hours < 1 || hours > SERIES_MAX_HOURS) {
    throw invalid(`hours must be a whole number from 1 to ${SERIES_MAX_HOURS}`, 'hours');
  }
  return hours;
}

// Up to this many hours of windows a chart shows five minutes at a time (72 bars at most); a
// longer span is shown by the hour, its sums and maxima added up, so that each bar stays visible.
const FINE_SPAN_HOURS = 6;

export async function endpointSeries(sql: Sql, username: string, hours: number): Promise<EndpointSeries> {
  const since = new Date(Date.now() - hours * 3_600_000);
  const [agent] = await sql<{ id: string }[]>`select id from agents where username = ${username}`;
  if (!agent) throw notFound(`No agent named ${username}.`);
  // The span of what exists decides the step.
  const [first] = await sql<{ at: Date | null }[]>`
    select min(window_start) as at from endpoint_attempt_windows where agent_id = ${agent.id} and window_start >= ${since}`;
  const fine = !first?.at || Date.now() - first.at.getTime() <= FINE_SPAN_HOURS * 3_600_000;
  const step = fine ? HEALTH_WINDOW_MINUTES : 60;
  const rows = await sql<{ at: Date; attempts: number; successes: number; timed: number; sumMs: string; maxMs: number | null }[]>`
    select date_bin(${step} * interval '1 minute', window_start, timestamptz '2000-01-01') as at,
           sum(attempts)::int as attempts, sum(successes)::int as successes, sum(timed)::int as timed,
           sum(sum_ms)::text as "sumMs", max(max_ms) as "maxMs"
    from endpoint_attempt_windows
    where agent_id = ${agent.id} and window_start >= ${since}
    group by 1
    order by 1`;
  return {
    username,
    windowMinutes: step,
    hours,
    since: since.toISOString(),
    windows: rows.map((w) => ({
      at: w.at.toISOString(),
      attempts: w.attempts,
      successes: w.successes,
      failures: w.attempts - w.successes,
      meanMs: w.timed === 0 ? null : Math.round(Number(w.sumMs) / w.timed),
      maxMs: w.maxMs,
    })),
  };
}
