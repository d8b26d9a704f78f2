import type { Sql } from '../../db/connect';
import { invalid, notFound } from '../shared/errors';
import { HEALTH_WINDOW_MINUTES } from './endpoint-health';

// One endpoint's attempts window by window, for the charts of its health detail: exact counts, and
// the mean and max of the windows' durations (the sums kept beside each window's histogram).

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

export async function endpointSeries(sql: Sql, username: string, hours: number): Promise<EndpointSeries> {
  const since = new Date(Date.now() - hours * 3_600_000);
  const [agent] = await sql<{ id: string; webhookUrl: string | null }[]>`
    select id, webhook_url as "webhookUrl" from agents where username = ${username}`;
  if (!agent) throw notFound(`No agent named ${username}.`);
  const rows = await sql<{ at: Date; attempts: number; successes: number; timed: number; sumMs: string; maxMs: number | null }[]>`
    select window_start as at, attempts, successes, timed, sum_ms::text as "sumMs", max_ms as "maxMs"
    from endpoint_attempt_windows
    where agent_id = ${agent.id} and window_start >= ${since}
    order by window_start`;
  return {
    username,
    windowMinutes: HEALTH_WINDOW_MINUTES,
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
