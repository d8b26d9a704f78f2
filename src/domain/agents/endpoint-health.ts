import type { Queries, Sql } from '../../db/connect';
import type { PendingQuery, Row } from 'postgres';
import { iso } from '../shared/iso-time';
import { webhookVersion } from '../deliveries/notify-jobs';
import { stalledSql } from '../deliveries/delivery-states';

// How an agent's webhook (its endpoint) has been answering, kept from every attempt as it is
// recorded (doorbells and test events, in the statement that records them), so that reading it
// costs a few index lookups however long the attempt log is. And the rule built on it: a webhook
// failing without a success for long enough warns people at stages, then is switched off.

// An agent's webhook counts while it is set and not switched off, by the service or by a person's
// pause: only then is a doorbell owed, and only then does a post queue one (the agent polls
// otherwise, as one without a webhook does).
export const webhookActive = (sql: Queries, agent: string) =>
  sql`${sql(agent)}.webhook_url is not null and ${sql(agent)}.webhook_disabled_at is null`;

// The latency histogram's bucket bounds: bucket i holds durations from bound i-1 (0 for the first)
// up to bound i; the last holds everything from the last bound on (time-outs among them).
export const ENDPOINT_LATENCY_BOUNDS_MS = [50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000];
// Attempts are counted per endpoint in windows of this length: the last hour is its last 12.
export const HEALTH_WINDOW_MINUTES = 5;
// The most recent attempts whose durations each health row keeps: the true percentiles are of these.
export const RECENT_ATTEMPTS = 100;
// How much of the handler's answer to its last failed attempt the health row keeps: its reason.
export const FAILURE_BODY_CHARS = 200;

// One finished attempt at an endpoint, as a source CTE for recordEndpointHealth must provide it.
// `ok`: the endpoint answered 2xx (retry-policy.ts's answeredOk, decided by the caller).
export type EndpointAttemptColumns = 'agent_id, webhook_version, attempted_at, duration_ms, ok, status, error, response_body';

// The CTEs (to follow a `with` list, after a comma) that fold the attempts of `source` into their
// endpoints' health and windows. An attempt sent to a webhook that has been saved again or removed
// since is left out: its figures belong to an endpoint that no longer exists. Endpoints are
// updated in agent order, so that two batches never wait on each other.
export function recordEndpointHealth(sql: Queries, source: string) {
  const bucket = sql`width_bucket(t.duration_ms, ${ENDPOINT_LATENCY_BOUNDS_MS}::int[])`;
  const counts = ENDPOINT_LATENCY_BOUNDS_MS.map((_, i) => sql`count(*) filter (where ${bucket} = ${i})::int`).concat(
    sql`count(*) filter (where ${bucket} = ${ENDPOINT_LATENCY_BOUNDS_MS.length})::int`,
  );
  const histogram = counts.reduce((all, one) => sql`${all}, ${one}`);
  return sql`
    tried as (
      select s.agent_id, s.attempted_at, s.attempted_at + s.duration_ms * interval '1 millisecond' as finished_at,
             s.duration_ms, s.ok, s.status, s.error, left(s.response_body, ${FAILURE_BODY_CHARS}) as body
      from ${sql(source)} s join agents ag on ag.id = s.agent_id
      where ag.webhook_url is not null and ${webhookVersion(sql, 'ag')} = s.webhook_version
    ), batch as (
      select t.agent_id, max(t.finished_at) filter (where t.ok) as last_success_at
      from tried t group by t.agent_id
    ), health as (
      insert into endpoint_health as h (agent_id, last_success_at, last_failure_at, last_failure_status, last_failure_error,
                                        last_failure_body, consecutive_failures, failing_since, recent_ms, recent_at)
      select t.agent_id, b.last_success_at,
             max(t.finished_at) filter (where not t.ok),
             (array_agg(t.status order by t.finished_at desc) filter (where not t.ok))[1],
             (array_agg(t.error order by t.finished_at desc) filter (where not t.ok))[1],
             (array_agg(t.body order by t.finished_at desc) filter (where not t.ok))[1],
             count(*) filter (where not t.ok and t.finished_at > coalesce(b.last_success_at, '-infinity')),
             min(t.finished_at) filter (where not t.ok and t.finished_at > coalesce(b.last_success_at, '-infinity')),
             array_agg(t.duration_ms order by t.attempted_at), array_agg(t.attempted_at order by t.attempted_at)
      from tried t join batch b on b.agent_id = t.agent_id
      group by t.agent_id, b.last_success_at
      order by t.agent_id
      on conflict (agent_id) do update set
        last_success_at = greatest(h.last_success_at, excluded.last_success_at),
        last_failure_at = greatest(h.last_failure_at, excluded.last_failure_at),
        last_failure_status = case when excluded.last_failure_at is null then h.last_failure_status else excluded.last_failure_status end,
        last_failure_error = case when excluded.last_failure_at is null then h.last_failure_error else excluded.last_failure_error end,
        last_failure_body = case when excluded.last_failure_at is null then h.last_failure_body else excluded.last_failure_body end,
        -- The batch's attempts join those kept, and the latest RECENT_ATTEMPTS by start stay: a
        -- batch can hold an attempt that began before one already kept (it took longer).
        (recent_ms, recent_at) = (
          select coalesce(array_agg(r.ms order by r.at), '{}'), coalesce(array_agg(r.at order by r.at), '{}')
          from (select ms, at from unnest(h.recent_ms || excluded.recent_ms, h.recent_at || excluded.recent_at) as u(ms, at)
                order by at desc limit ${RECENT_ATTEMPTS}) r),
        -- A success in the batch ends the failing spell; the failures after it begin the next.
        consecutive_failures = case when excluded.last_success_at is not null then excluded.consecutive_failures
                                    else h.consecutive_failures + excluded.consecutive_failures end,
        failing_since = case when excluded.last_success_at is not null then excluded.failing_since
                             else coalesce(h.failing_since, excluded.failing_since) end,
        warned_stage = case when excluded.last_success_at is not null then 0 else h.warned_stage end,
        warned_at = case when excluded.last_success_at is not null then null else h.warned_at end
      returning h.agent_id
    ), windows as (
      insert into endpoint_attempt_windows as w (agent_id, window_start, attempts, successes, latency_buckets, timed, sum_ms, max_ms)
      select t.agent_id, date_bin(${HEALTH_WINDOW_MINUTES} * interval '1 minute', t.attempted_at, timestamptz '2000-01-01'),
             count(*)::int, (count(*) filter (where t.ok))::int, array[${histogram}],
             count(*)::int, sum(t.duration_ms), max(t.duration_ms)
      from tried t
      group by 1, 2
      order by 1, 2
      on conflict (agent_id, window_start) do update set
        attempts = w.attempts + excluded.attempts,
        successes = w.successes + excluded.successes,
        latency_buckets = add_counts(w.latency_buckets, excluded.latency_buckets),
        timed = w.timed + excluded.timed,
        sum_ms = w.sum_ms + excluded.sum_ms,
        max_ms = greatest(w.max_ms, excluded.max_ms)
      returning w.agent_id
    )`;
}

// What a histogram can truly say of a share of attempts: the bound of the bucket that holds the
// attempt at that rank, so that at least that share took less ("95 % under 2.5 s"). Null without
// attempts, or when the share reaches into the last, open-ended bucket (no bound is known then).
export function shareUnderMs(buckets: number[], share: number): number | null {
  const total = buckets.reduce((a, b) => a + b, 0);
  if (total === 0) return null;
  const rank = Math.ceil(share * total);
  let below = 0;
  for (let i = 0; i < buckets.length; i++) {
    below += buckets[i]!;
    if (below >= rank) return ENDPOINT_LATENCY_BOUNDS_MS[i] ?? null;
  }
  return null;
}

// The attempts counted in the last hour or day of five-minute windows. Mean and max are exact over
// `timed` (every attempt this release recorded; `attempts` may count a few more recorded by the
// previous one during an upgrade); the only figure from the histogram is p95UnderMs, a bound.
export type WindowFigures = {
  attempts: number;
  successes: number;
  // Null without attempts in the window.
  successRate: number | null;
  timed: number;
  meanMs: number | null;
  maxMs: number | null;
  // At least 95 % of the attempts took less than this (a bucket bound of ENDPOINT_LATENCY_BOUNDS_MS).
  p95UnderMs: number | null;
};

// True figures over the endpoint's latest attempts (at most RECENT_ATTEMPTS), whatever their age:
// p50 and p95 are durations some attempt took (the nearest rank), not interpolations.
export type RecentFigures = {
  attempts: number;
  // When the oldest of them began; null without attempts.
  since: string | null;
  p50Ms: number | null;
  p95Ms: number | null;
  maxMs: number | null;
};

// `disabled`: the service switched it off for failing; `paused`: a person paused it by hand.
export const ENDPOINT_STATES = ['untried', 'healthy', 'slow', 'not-reporting', 'failing', 'disabled', 'paused'] as const;
export type EndpointState = (typeof ENDPOINT_STATES)[number];

export type EndpointHealth = {
  state: EndpointState;
  lastSuccessAt: string | null;
  lastFailureAt: string | null;
  lastFailureStatus: number | null;
  lastFailureError: string | null;
  // The first FAILURE_BODY_CHARS characters of the handler's answer to the last failed attempt.
  lastFailureBody: string | null;
  consecutiveFailures: number;
  failingSince: string | null;
  // Warning stages reached in this failing spell (WEBHOOK_WARN_AFTER_MS), and when the last was.
  warnedStage: number;
  warnedAt: string | null;
  // How many stages there are: "warned 2 of 3".
  warnStages: number;
  // When it will be switched off unless it answers 2xx: failingSince + WEBHOOK_DISABLE_AFTER_MS;
  // null while it is not failing, once switched off, or where nothing is ever switched off.
  switchesOffAt: string | null;
  disabledAt: string | null;
  disabledReason: string | null;
  // Its deliveries notified but not reported delivered within STALLED_AFTER_MS.
  stalled: number;
  // The p95 above which it reads as slow (WEBHOOK_SLOW_MS).
  slowMs: number;
  recent: RecentFigures;
  // Who paused it by hand (a person's username, or `cli`); null unless paused (then disabledAt and
  // disabledReason are the pause's).
  pausedBy: string | null;
  lastHour: WindowFigures;
  lastDay: WindowFigures;
};

// What reading health depends on besides the rows: the switch-off and warnings to come, and when
// an endpoint reads as slow or not reporting (config.ts's endpointHealthRule).
export type HealthReading = { warnAfterMs: number[]; disableAfterMs: number | null; slowMs: number; stalledAfterMs: number };

type Fragment = PendingQuery<Row[]>;

// The nearest-rank p95 of the recent attempts kept on a health row; null without any.
const recentP95Sql = (sql: Queries, health: string) =>
  sql`(select percentile_disc(0.95) within group (order by ms) from unnest(${sql(health)}.recent_ms) as ms)`;

// The state an endpoint reads as: the one rule the dashboard, the metrics and the alerts share.
// `stalled`: how many of the agent's deliveries are stalled (0 where the caller does not count).
// Failing outranks not reporting, which outranks slow: each is what a person fixes first.
export const endpointStateSql = (sql: Queries, agent: string, health: string, stalled: Fragment, slowMs: number) => sql`
  case when ${sql(agent)}.webhook_disabled_at is not null and ${sql(agent)}.webhook_paused_by is not null then 'paused'
       when ${sql(agent)}.webhook_disabled_at is not null then 'disabled'
       when ${sql(health)}.agent_id is null then 'untried'
       when ${sql(health)}.failing_since is not null then 'failing'
       when ${stalled} > 0 then 'not-reporting'
       when ${recentP95Sql(sql, health)} > ${slowMs} then 'slow'
       else 'healthy' end`;

// Stalled deliveries per recipient, as `recipient_id, n`: read from deliveries_awaiting_report_idx,
// so its cost grows with the service's Notified-without-report backlog (as the Overview's stalled
// list does), not with the deliveries.
export const stalledByRecipient = (sql: Queries, stalledAfterMs: number, agentIds: string[] | null) => sql`
  select d.recipient_id, count(*)::int as n from deliveries d
  where ${stalledSql(sql, stalledAfterMs)} ${agentIds ? sql`and d.recipient_id = any(${agentIds}::uuid[])` : sql``}
  group by d.recipient_id`;

type HealthRow = {
  agentId: string;
  state: EndpointState;
  disabledAt: Date | null;
  disabledReason: string | null;
  pausedBy: string | null;
  lastSuccessAt: Date | null;
  lastFailureAt: Date | null;
  lastFailureStatus: number | null;
  lastFailureError: string | null;
  lastFailureBody: string | null;
  consecutiveFailures: number | null;
  failingSince: Date | null;
  warnedStage: number | null;
  warnedAt: Date | null;
  stalled: number;
  recentAttempts: number;
  recentSince: Date | null;
  recentP50: number | null;
  recentP95: number | null;
  recentMax: number | null;
  hour: WindowSums;
  day: WindowSums;
};

type WindowSums = { attempts: number; successes: number; timed: number; sumMs: number; maxMs: number | null; latency: number[] };

const figures = (w: WindowSums): WindowFigures => ({
  attempts: w.attempts,
  successes: w.successes,
  successRate: w.attempts === 0 ? null : w.successes / w.attempts,
  timed: w.timed,
  meanMs: w.timed === 0 ? null : Math.round(w.sumMs / w.timed),
  maxMs: w.maxMs,
  p95UnderMs: shareUnderMs(w.latency, 0.95),
});

// The health of the given agents' webhooks, by agent id; agents without a webhook are absent.
// Reads one health row and at most a day of windows (288) per agent, by primary key, once, and
// the agents' stalled deliveries.
export async function endpointHealthOf(sql: Queries, agentIds: string[], reading: HealthReading): Promise<Map<string, EndpointHealth>> {
  if (agentIds.length === 0) return new Map();
  const rows = await sql<HealthRow[]>`
    with stalled as (${stalledByRecipient(sql, reading.stalledAfterMs, agentIds)})
    select a.id as "agentId", ${endpointStateSql(sql, 'a', 'h', sql`coalesce(s.n, 0)`, reading.slowMs)} as state,
           a.webhook_disabled_at as "disabledAt", a.webhook_disabled_reason as "disabledReason", a.webhook_paused_by as "pausedBy",
           h.last_success_at as "lastSuccessAt", h.last_failure_at as "lastFailureAt",
           h.last_failure_status as "lastFailureStatus", h.last_failure_error as "lastFailureError", h.last_failure_body as "lastFailureBody",
           h.consecutive_failures as "consecutiveFailures", h.failing_since as "failingSince", h.warned_stage as "warnedStage",
           h.warned_at as "warnedAt", coalesce(s.n, 0) as stalled,
           r.n as "recentAttempts", r.since as "recentSince", r.p50 as "recentP50", r.p95 as "recentP95", r.max as "recentMax",
           last_hour.sums as hour, last_day.sums as day
    from agents a
    left join endpoint_health h on h.agent_id = a.id
    left join stalled s on s.recipient_id = a.id
    left join lateral (
      select count(*)::int as n, min(at) as since, percentile_disc(0.5) within group (order by ms) as p50,
             percentile_disc(0.95) within group (order by ms) as p95, max(ms) as max
      from unnest(h.recent_ms, h.recent_at) as u(ms, at)
    ) r on true
    left join lateral (${windowSums(sql, hourStart(sql))}) last_hour on true
    left join lateral (${windowSums(sql, dayStart(sql))}) last_day on true
    where a.id = any(${agentIds}::uuid[]) and a.webhook_url is not null`;
  return new Map(rows.map((r) => [r.agentId, toHealth(r, reading)]));
}

// The windows of `a` that began since `from`, summed as one JSON object (WindowSums; zeros without
// any), each bucket of the histograms summed as an element of an array: one pass over the windows
// by primary key, with no unnesting. The hour reads its 12 windows apart, so that the day's 288 are
// summed without a filter per figure.
const windowSums = (sql: Queries, from: Fragment) => {
  const buckets = [...ENDPOINT_LATENCY_BOUNDS_MS, Infinity]
    .map((_, i) => sql`coalesce(sum(latency_buckets[${i + 1}]), 0)::int`)
    .reduce((all, one) => sql`${all}, ${one}`);
  return sql`
    select json_build_object('attempts', coalesce(sum(attempts), 0), 'successes', coalesce(sum(successes), 0),
             'timed', coalesce(sum(timed), 0), 'sumMs', coalesce(sum(sum_ms), 0), 'maxMs', max(max_ms),
             'latency', array[${buckets}]) as sums
    from endpoint_attempt_windows
    where agent_id = a.id and window_start >= ${from}`;
};

// The windows that make up the last hour and day: those that began within it.
const hourStart = (sql: Queries) => sql`now() - interval '1 hour'`;
const dayStart = (sql: Queries) => sql`now() - interval '1 day'`;

// When a failing endpoint is switched off unless it answers; null where it never will be.
export const switchesOffAt = (failingSince: Date | null, disabledAt: Date | null, rule: { disableAfterMs: number | null }) =>
  failingSince && !disabledAt && rule.disableAfterMs !== null ? new Date(failingSince.getTime() + rule.disableAfterMs).toISOString() : null;

function toHealth(r: HealthRow, reading: HealthReading): EndpointHealth {
  return {
    state: r.state,
    lastSuccessAt: iso(r.lastSuccessAt),
    lastFailureAt: iso(r.lastFailureAt),
    lastFailureStatus: r.lastFailureStatus,
    lastFailureError: r.lastFailureError,
    lastFailureBody: r.lastFailureBody,
    consecutiveFailures: r.consecutiveFailures ?? 0,
    failingSince: iso(r.failingSince),
    warnedStage: r.warnedStage ?? 0,
    warnedAt: iso(r.warnedAt),
    warnStages: reading.warnAfterMs.length,
    switchesOffAt: switchesOffAt(r.failingSince, r.disabledAt, reading),
    disabledAt: iso(r.disabledAt),
    disabledReason: r.disabledReason,
    pausedBy: r.disabledAt ? r.pausedBy : null,
    stalled: r.stalled,
    slowMs: reading.slowMs,
    recent: {
      attempts: r.recentAttempts,
      since: iso(r.recentSince),
      p50Ms: r.recentP50,
      p95Ms: r.recentP95,
      maxMs: r.recentMax,
    },
    lastHour: figures(r.hour),
    lastDay: figures(r.day),
  };
}

// Endpoints by state, across the service (the metrics' gauge): agents with a webhook, archived
// ones left out (nothing is sent to them).
export async function countEndpoints(sql: Sql, reading: Pick<HealthReading, 'slowMs' | 'stalledAfterMs'>): Promise<Record<EndpointState, number>> {
  const rows = await sql<{ state: EndpointState; n: number }[]>`
    with stalled as (${stalledByRecipient(sql, reading.stalledAfterMs, null)})
    select ${endpointStateSql(sql, 'a', 'h', sql`coalesce(s.n, 0)`, reading.slowMs)} as state, count(*)::int as n
    from agents a left join endpoint_health h on h.agent_id = a.id left join stalled s on s.recipient_id = a.id
    where a.webhook_url is not null and a.archived_at is null
    group by 1`;
  const counts = Object.fromEntries(ENDPOINT_STATES.map((state) => [state, 0])) as Record<EndpointState, number>;
  for (const r of rows) counts[r.state] = r.n;
  return counts;
}

// When a failing webhook warns people, and when it is switched off; null: never.
export type HealthRule = { warnAfterMs: number[]; disableAfterMs: number | null };

export type HealthTransition = {
  agentId: string;
  username: string;
  url: string;
  transition: 'warned' | 'disabled';
  // For a warning, the stage reached (1 for the first of warnAfterMs).
  stage: number;
  failingSince: string;
  lastFailureStatus: number | null;
  lastFailureError: string | null;
};

// Why a webhook was switched off, in the words the dashboard shows.
export const disabledReason = (rule: { disableAfterMs: number }) =>
  `It answered no attempt with 2xx for ${spell(rule.disableAfterMs)}, so no more doorbells were sent and the agent polls instead.`;

// How long a webhook a person switched back on (or resumed) while it was failing has to answer
// 2xx once, after it fails again, before it is switched off again: the first warning stage (the
// whole spell when there is none, and never longer than it). Its spell goes on rather than starting
// afresh, so that a still-dead endpoint is not given another five days (docs/internals/decisions.md).
export const probationMs = (rule: { warnAfterMs: number[]; disableAfterMs: number }) =>
  Math.min(rule.warnAfterMs[0] ?? rule.disableAfterMs, rule.disableAfterMs);

export const disabledAgainReason = (rule: { warnAfterMs: number[]; disableAfterMs: number }) =>
  `Switched back on while failing, it failed again and answered nothing with 2xx within ${spell(probationMs(rule))}, so no more doorbells were sent and the agent polls instead.`;

// A duration in a person's words: whole days, hours or minutes (seconds below a minute).
export function spell(ms: number): string {
  const units: [number, string][] = [
    [86_400_000, 'day'],
    [3_600_000, 'hour'],
    [60_000, 'minute'],
    [1_000, 'second'],
  ];
  for (const [size, name] of units) {
    if (ms >= size && ms % size === 0) return `${ms / size} ${name}${ms === size ? '' : 's'}`;
  }
  const [size, name] = units.find(([size]) => ms >= size) ?? [1, 'millisecond'];
  const n = Math.round((ms / size) * 10) / 10;
  return `${n} ${name}${n === 1 ? '' : 's'}`;
}

// The sweep the worker's crontab runs every minute: every webhook failing without a success moves
// to the warning stage its spell has reached (people are warned once per stage), and one failing
// for longer than disableAfterMs is switched off; one a person switched back on or resumed during
// its spell is switched off again once it has failed since and probationMs has passed since then.
// One statement, its rows locked, so that two sweeps never warn twice; a success recorded
// meanwhile (which resets warned_stage) waits for it. One switched off is told as switched off
// only, its stages marked warned, so that switched back on it does not warn of them after the fact.
export async function sweepEndpointHealth(sql: Queries, rule: HealthRule): Promise<HealthTransition[]> {
  const disableAfter = rule.disableAfterMs;
  const resumedInSpell = sql`coalesce(a.webhook_resumed_at > h.failing_since, false)`;
  const overdue =
    disableAfter === null
      ? sql`false`
      : sql`case when ${resumedInSpell}
                 then h.last_failure_at > a.webhook_resumed_at
                      and a.webhook_resumed_at <= now() - ${probationMs({ ...rule, disableAfterMs: disableAfter })} * interval '1 millisecond'
                 else h.failing_since <= now() - ${disableAfter} * interval '1 millisecond' end`;
  const reason =
    disableAfter === null
      ? sql`null::text`
      : sql`case when s.resumed_in_spell then ${disabledAgainReason({ ...rule, disableAfterMs: disableAfter })}
                 else ${disabledReason({ disableAfterMs: disableAfter })} end`;
  return sql<HealthTransition[]>`
    with spell as (
      select h.agent_id, h.failing_since, h.warned_stage, h.last_failure_status, h.last_failure_error,
             (select count(*) from unnest(${rule.warnAfterMs}::bigint[]) as w(ms)
              where h.failing_since <= now() - w.ms * interval '1 millisecond')::int as stage,
             ${overdue} as overdue, ${resumedInSpell} as resumed_in_spell
      from endpoint_health h join agents a on a.id = h.agent_id
      where h.failing_since is not null and ${webhookActive(sql, 'a')} and a.archived_at is null
      order by h.agent_id
      for update of h, a
    ), warned as (
      update endpoint_health h set warned_stage = s.stage, warned_at = now()
      from spell s where h.agent_id = s.agent_id and s.stage > s.warned_stage
      returning h.agent_id, s.stage
    ), disabled as (
      update agents a set webhook_disabled_at = now(), webhook_disabled_reason = ${reason}, webhook_failing_since = s.failing_since,
                          webhook_paused_by = null
      from spell s where a.id = s.agent_id and s.overdue
      returning a.id as agent_id
    )
    select a.id as "agentId", a.username, a.webhook_url as url,
           case when d.agent_id is not null then 'disabled' else 'warned' end as transition,
           coalesce(w.stage, s.stage) as stage, s.failing_since as "failingSince",
           s.last_failure_status as "lastFailureStatus", s.last_failure_error as "lastFailureError"
    from spell s join agents a on a.id = s.agent_id
    left join warned w on w.agent_id = s.agent_id
    left join disabled d on d.agent_id = s.agent_id
    where w.agent_id is not null or d.agent_id is not null
    order by a.username`.then((rows) => rows.map((r) => ({ ...r, failingSince: new Date(r.failingSince).toISOString() })));
}
