import type { Queries, Sql } from '../../db/connect';
import { iso } from '../shared/iso-time';
import { webhookVersion } from '../deliveries/notify-jobs';

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

// One finished attempt at an endpoint, as a source CTE for recordEndpointHealth must provide it.
// `ok`: the endpoint answered 2xx (retry-policy.ts's answeredOk, decided by the caller).
export type EndpointAttemptColumns = 'agent_id, webhook_version, attempted_at, duration_ms, ok, status, error';

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
             s.duration_ms, s.ok, s.status, s.error
      from ${sql(source)} s join agents ag on ag.id = s.agent_id
      where ag.webhook_url is not null and ${webhookVersion(sql, 'ag')} = s.webhook_version
    ), batch as (
      select t.agent_id, max(t.finished_at) filter (where t.ok) as last_success_at
      from tried t group by t.agent_id
    ), health as (
      insert into endpoint_health as h (agent_id, last_success_at, last_failure_at, last_failure_status, last_failure_error,
                                        consecutive_failures, failing_since)
      select t.agent_id, b.last_success_at,
             max(t.finished_at) filter (where not t.ok),
             (array_agg(t.status order by t.finished_at desc) filter (where not t.ok))[1],
             (array_agg(t.error order by t.finished_at desc) filter (where not t.ok))[1],
             count(*) filter (where not t.ok and t.finished_at > coalesce(b.last_success_at, '-infinity')),
             min(t.finished_at) filter (where not t.ok and t.finished_at > coalesce(b.last_success_at, '-infinity'))
      from tried t join batch b on b.agent_id = t.agent_id
      group by t.agent_id, b.last_success_at
      order by t.agent_id
      on conflict (agent_id) do update set
        last_success_at = greatest(h.last_success_at, excluded.last_success_at),
        last_failure_at = greatest(h.last_failure_at, excluded.last_failure_at),
        last_failure_status = case when excluded.last_failure_at is null then h.last_failure_status else excluded.last_failure_status end,
        last_failure_error = case when excluded.last_failure_at is null then h.last_failure_error else excluded.last_failure_error end,
        -- A success in the batch ends the failing spell; the failures after it begin the next.
        consecutive_failures = case when excluded.last_success_at is not null then excluded.consecutive_failures
                                    else h.consecutive_failures + excluded.consecutive_failures end,
        failing_since = case when excluded.last_success_at is not null then excluded.failing_since
                             else coalesce(h.failing_since, excluded.failing_since) end,
        warned_stage = case when excluded.last_success_at is not null then 0 else h.warned_stage end
      returning h.agent_id
    ), windows as (
      insert into endpoint_attempt_windows as w (agent_id, window_start, attempts, successes, latency_buckets)
      select t.agent_id, date_bin(${HEALTH_WINDOW_MINUTES} * interval '1 minute', t.attempted_at, timestamptz '2000-01-01'),
             count(*)::int, (count(*) filter (where t.ok))::int, array[${histogram}]
      from tried t
      group by 1, 2
      order by 1, 2
      on conflict (agent_id, window_start) do update set
        attempts = w.attempts + excluded.attempts,
        successes = w.successes + excluded.successes,
        latency_buckets = add_counts(w.latency_buckets, excluded.latency_buckets)
      returning w.agent_id
    )`;
}

// A percentile from a latency histogram, interpolated within its bucket as Prometheus's
// histogram_quantile does; the last, open-ended bucket answers its lower bound. Null without attempts.
export function percentileMs(buckets: number[], q: number): number | null {
  const total = buckets.reduce((a, b) => a + b, 0);
  if (total === 0) return null;
  const rank = q * total;
  let below = 0;
  for (let i = 0; i < buckets.length; i++) {
    const n = buckets[i]!;
    if (n > 0 && below + n >= rank) {
      const low = i === 0 ? 0 : ENDPOINT_LATENCY_BOUNDS_MS[i - 1]!;
      const high = ENDPOINT_LATENCY_BOUNDS_MS[i];
      if (high === undefined) return low;
      return Math.round(low + ((high - low) * (rank - below)) / n);
    }
    below += n;
  }
  return ENDPOINT_LATENCY_BOUNDS_MS.at(-1)!;
}

export type WindowFigures = {
  attempts: number;
  successes: number;
  // Null without attempts in the window.
  successRate: number | null;
  p50Ms: number | null;
  p95Ms: number | null;
};

// `disabled`: the service switched it off for failing; `paused`: a person paused it by hand.
export type EndpointState = 'untried' | 'healthy' | 'failing' | 'disabled' | 'paused';

export type EndpointHealth = {
  state: EndpointState;
  lastSuccessAt: string | null;
  lastFailureAt: string | null;
  lastFailureStatus: number | null;
  lastFailureError: string | null;
  consecutiveFailures: number;
  failingSince: string | null;
  // Warning stages reached in this failing spell (WEBHOOK_WARN_AFTER_MS).
  warnedStage: number;
  // When it was switched off or paused, and why (the service's sentence, or the person's reason).
  disabledAt: string | null;
  disabledReason: string | null;
  // Who paused it by hand (a person's username, or `cli`); null unless paused.
  pausedBy: string | null;
  lastHour: WindowFigures;
  lastDay: WindowFigures;
};

type HealthRow = {
  agentId: string;
  disabledAt: Date | null;
  disabledReason: string | null;
  pausedBy: string | null;
  tried: boolean;
  lastSuccessAt: Date | null;
  lastFailureAt: Date | null;
  lastFailureStatus: number | null;
  lastFailureError: string | null;
  consecutiveFailures: number | null;
  failingSince: Date | null;
  warnedStage: number | null;
  hourAttempts: number;
  hourSuccesses: number;
  hourLatency: number[] | null;
  dayAttempts: number;
  daySuccesses: number;
  dayLatency: number[] | null;
};

const figures = (attempts: number, successes: number, latency: number[] | null): WindowFigures => ({
  attempts,
  successes,
  successRate: attempts === 0 ? null : successes / attempts,
  p50Ms: percentileMs(latency ?? [], 0.5),
  p95Ms: percentileMs(latency ?? [], 0.95),
});

// The state an endpoint reads as: the one rule the dashboard, the metrics and the alerts share.
export const endpointStateSql = (sql: Queries, agent: string, health: string) => sql`
  case when ${sql(agent)}.webhook_disabled_at is not null and ${sql(agent)}.webhook_paused_by is not null then 'paused'
       when ${sql(agent)}.webhook_disabled_at is not null then 'disabled'
       when ${sql(health)}.agent_id is null then 'untried'
       when ${sql(health)}.failing_since is not null then 'failing'
       else 'healthy' end`;

// The health of the given agents' webhooks, by agent id; agents without a webhook are absent.
// Reads one health row and at most a day of windows (288) per agent, by primary key, once.
export async function endpointHealthOf(sql: Queries, agentIds: string[]): Promise<Map<string, EndpointHealth>> {
  if (agentIds.length === 0) return new Map();
  const rows = await sql<HealthRow[]>`
    select a.id as "agentId", a.webhook_disabled_at as "disabledAt", a.webhook_disabled_reason as "disabledReason",
           a.webhook_paused_by as "pausedBy",
           h.agent_id is not null as tried, h.last_success_at as "lastSuccessAt", h.last_failure_at as "lastFailureAt",
           h.last_failure_status as "lastFailureStatus", h.last_failure_error as "lastFailureError",
           h.consecutive_failures as "consecutiveFailures", h.failing_since as "failingSince", h.warned_stage as "warnedStage",
           coalesce(w.hour_attempts, 0)::int as "hourAttempts", coalesce(w.hour_successes, 0)::int as "hourSuccesses",
           w.hour_latency as "hourLatency",
           coalesce(w.day_attempts, 0)::int as "dayAttempts", coalesce(w.day_successes, 0)::int as "daySuccesses",
           w.day_latency as "dayLatency"
    from agents a
    left join endpoint_health h on h.agent_id = a.id
    left join lateral (
      select sum(attempts) filter (where window_start >= ${hourStart(sql)}) as hour_attempts,
             sum(successes) filter (where window_start >= ${hourStart(sql)}) as hour_successes,
             array[${bucketSums(sql, true)}] as hour_latency,
             sum(attempts) as day_attempts, sum(successes) as day_successes,
             array[${bucketSums(sql, false)}] as day_latency
      from endpoint_attempt_windows
      where agent_id = a.id and window_start >= ${dayStart(sql)}
    ) w on true
    where a.id = any(${agentIds}::uuid[]) and a.webhook_url is not null`;
  return new Map(rows.map((r) => [r.agentId, toHealth(r)]));
}

// Each bucket of the windows' histograms summed, as the elements of an array; one pass over the
// windows, with no unnesting.
const bucketSums = (sql: Queries, lastHourOnly: boolean) =>
  [...ENDPOINT_LATENCY_BOUNDS_MS, Infinity]
    .map((_, i) => {
      const sum = sql`sum(latency_buckets[${i + 1}])`;
      return sql`coalesce(${lastHourOnly ? sql`${sum} filter (where window_start >= ${hourStart(sql)})` : sum}, 0)::int`;
    })
    .reduce((all, one) => sql`${all}, ${one}`);

// The windows that make up the last hour and day: those that began within it.
const hourStart = (sql: Queries) => sql`now() - interval '1 hour'`;
const dayStart = (sql: Queries) => sql`now() - interval '1 day'`;

function toHealth(r: HealthRow): EndpointHealth {
  const state: EndpointState = r.disabledAt ? (r.pausedBy ? 'paused' : 'disabled') : !r.tried ? 'untried' : r.failingSince ? 'failing' : 'healthy';
  return {
    state,
    lastSuccessAt: iso(r.lastSuccessAt),
    lastFailureAt: iso(r.lastFailureAt),
    lastFailureStatus: r.lastFailureStatus,
    lastFailureError: r.lastFailureError,
    consecutiveFailures: r.consecutiveFailures ?? 0,
    failingSince: iso(r.failingSince),
    warnedStage: r.warnedStage ?? 0,
    disabledAt: iso(r.disabledAt),
    disabledReason: r.disabledReason,
    pausedBy: r.disabledAt ? r.pausedBy : null,
    lastHour: figures(r.hourAttempts, r.hourSuccesses, r.hourLatency),
    lastDay: figures(r.dayAttempts, r.daySuccesses, r.dayLatency),
  };
}

// Endpoints by state, across the service (the metrics' gauge): agents with a webhook, archived
// ones left out (nothing is sent to them).
export async function countEndpoints(sql: Sql): Promise<Record<EndpointState, number>> {
  const rows = await sql<{ state: EndpointState; n: number }[]>`
    select ${endpointStateSql(sql, 'a', 'h')} as state, count(*)::int as n
    from agents a left join endpoint_health h on h.agent_id = a.id
    where a.webhook_url is not null and a.archived_at is null
    group by 1`;
  const counts: Record<EndpointState, number> = { untried: 0, healthy: 0, failing: 0, disabled: 0, paused: 0 };
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
      update endpoint_health h set warned_stage = s.stage
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
