import type { Queries, Reads } from '../../db/connect';
import { countEndpoints, endpointStateSql, switchesOffAt, type HealthReading } from '../agents/endpoint-health';
import { invalid } from '../shared/errors';
import { iso } from '../shared/iso-time';
import { pageQuery } from '../shared/keyset';
import type { Page } from '../shared/schemas';
import { NO_FILTER, filterSql } from './delivery-query';
import { retryingSql, stalledSql } from './delivery-states';
import { failureKind } from './retry-policy';
import { attemptedSince } from './delivery-steps';

// What the dashboard's overview shows first: the day's headline figures, how deliveries fared over
// the last day (in bins as fine as the data there is) and how long their doorbells took, the
// webhooks in trouble (one line each: who, what fails, how many deliveries it held up, since when;
// all of them counted and grouped by failure), the agents whose handlers do not report, the
// threads waiting for a person's decision on closing, how many messages wait for a person's
// approval, and the threads the loop breaker paused.

export const OVERVIEW_HOURS = 24;
// Lines in each list; the lists behind them (Agents, Deliveries, Threads) have the rest. The
// webhooks in trouble are all counted and grouped, and read in full a page at a time.
export const OVERVIEW_LIST_LIMIT = 10;

// The charts' bin: the finest of these that spans the data of the day in at most 24 bins, so that
// an hour of data is twelve bars, not one at the edge of a day; never fewer than MIN_BINS.
const BIN_MINUTES = [5, 15, 60];
const MAX_BINS = 24;
const MIN_BINS = 6;

export type OverviewBin = {
  at: string;
  // Deliveries accepted in the bin, by where each is now. Accepted ones are told apart by what
  // they wait for: a polling agent to fetch them, or the service to ring their doorbell.
  waitingForPoll: number;
  doorbellOwed: number;
  retrying: number;
  notified: number;
  delivered: number;
  fetched: number;
  failed: number;
  // From acceptance to the handler's 2xx, for the bin's deliveries whose doorbell was answered.
  doorbellP50Ms: number | null;
  doorbellP95Ms: number | null;
};

export type EndpointTrouble = {
  username: string;
  url: string;
  state: 'failing' | 'disabled' | 'paused';
  // The last failure, as a kind a person can group by: "HTTP 500", "connection failed (ECONNREFUSED)".
  failure: string;
  failingSince: string;
  disabledAt: string | null;
  // The warning stages reached, of how many, and when the last was; when it will be switched off.
  warnedStage: number;
  warnStages: number;
  warnedAt: string | null;
  switchesOffAt: string | null;
  // The last failure's status (null without an answer) and the first bytes of the handler's answer.
  lastFailureStatus: number | null;
  lastFailureBody: string | null;
  // Deliveries to it accepted in the overview's day that failed or wait for a retry after an
  // attempt in this failing spell; `countedSince` is the later of the spell's start and the day's.
  deliveries: number;
  countedSince: string;
};

// The day at a glance, each figure exact and saying what it counts.
export type Headline = {
  // Deliveries accepted since `since`, and how many of them are Failed now.
  deliveries: number;
  failed: number;
  // Attempts at webhooks (doorbells and test events) in the last 24 hours, and how many were not
  // answered 2xx.
  attempts: number;
  attemptsFailed: number;
  // Webhooks by state (endpoint-health.ts), archived agents left out.
  endpoints: Record<string, number>;
  // Agents with at least one Stalled delivery.
  stalledAgents: number;
};

export type Overview = {
  // The start of the day the figures count (24 whole hours, the current one last).
  since: string;
  headline: Headline;
  // The charts' bins, oldest first, from the first with a delivery (or the day's start).
  binMinutes: number;
  bins: OverviewBin[];
  // Over the same bins: the doorbell latency of all of them together.
  doorbellP50Ms: number | null;
  doorbellP95Ms: number | null;
  // The first OVERVIEW_LIST_LIMIT webhooks in trouble, switched off first, then longest failing;
  // how many there are in all, and how many by the kind of their last failure.
  trouble: EndpointTrouble[];
  troubleTotal: number;
  troubleGroups: { failure: string; endpoints: number; disabled: number }[];
  stalledAgents: { username: string; stalled: number; oldestNotifiedAt: string }[];
  closeRequests: { threadId: string; title: string; requestedAt: string | null }[];
  holds: { waiting: number; paused: { threadId: string; title: string; pausedAt: string }[] };
};

const HOUR_MS = 3_600_000;
const MINUTE_MS = 60_000;

type TroubleRow = Omit<EndpointTrouble, 'failure' | 'failingSince' | 'disabledAt' | 'countedSince' | 'warnedAt' | 'warnStages' | 'switchesOffAt'> & {
  error: string | null;
  failingSince: Date;
  disabledAt: Date | null;
  countedSince: Date;
  warnedAt: Date | null;
  cursor: string;
};

// Where a page of the webhooks in trouble starts: the cursor the previous page answered, as
// `<0 switched off, 1 failing>_<failing since, microseconds since 1970>_<username>`.
type TroubleKey = { failingOnly: boolean; micros: string; username: string };
const TROUBLE_KEY = /^([01])_(\d{1,16})_(.+)$/;

// The webhooks in trouble, in the Overview's order, from `after` on: each one's last failure and
// how many deliveries of the day it held up. Failing or switched off, whatever else: the state
// counts neither stalled deliveries nor latency.
function endpointsInTrouble(sql: Queries, since: Date, stalledAfterMs: number, after: TroubleKey | null, limit: number) {
  const inDay = filterSql(sql, { ...NO_FILTER, from: since }, stalledAfterMs);
  return sql<TroubleRow[]>`
      select a.username, a.webhook_url as url, ${endpointStateSql(sql, 'a', 'h', sql`0`, 0)} as state,
             h.last_failure_status as "lastFailureStatus", h.last_failure_error as error, h.last_failure_body as "lastFailureBody",
             h.failing_since as "failingSince", a.webhook_disabled_at as "disabledAt", h.warned_stage as "warnedStage",
             h.warned_at as "warnedAt",
             greatest(h.failing_since, ${since}) as "countedSince",
             (select count(*) from deliveries d
              where d.recipient_id = a.id and (d.step = 'failed' or ${retryingSql(sql)}) ${inDay}
                and ${attemptedSince(sql, sql`h.failing_since`)})::int as deliveries,
             (a.webhook_disabled_at is null)::int::text || '_' || (extract(epoch from h.failing_since) * 1000000)::bigint::text
               || '_' || a.username as cursor
      from endpoint_health h join agents a on a.id = h.agent_id
      where h.failing_since is not null and a.webhook_url is not null and a.archived_at is null
        ${after
          ? sql`and (a.webhook_disabled_at is null, h.failing_since, a.username)
                    > (${after.failingOnly}::boolean, timestamptz 'epoch' + ${after.micros}::bigint * interval '1 microsecond', ${after.username}::text)`
          : sql``}
      order by a.webhook_disabled_at is null, h.failing_since, a.username
      limit ${limit}`;
}

const troubleOf =
  (rule: HealthReading) =>
  ({ error, failingSince, disabledAt, countedSince, warnedAt, cursor: _cursor, ...t }: TroubleRow): EndpointTrouble => ({
    ...t,
    failure: failureKind({ status: t.lastFailureStatus, error }),
    failingSince: failingSince.toISOString(),
    disabledAt: iso(disabledAt),
    warnStages: rule.warnAfterMs.length,
    warnedAt: iso(warnedAt),
    switchesOffAt: switchesOffAt(failingSince, disabledAt, rule),
    countedSince: countedSince.toISOString(),
  });

const dayStart = (now: Date) => new Date(Math.floor(now.getTime() / HOUR_MS) * HOUR_MS - (OVERVIEW_HOURS - 1) * HOUR_MS);

// Every webhook in trouble, a page at a time (`after`: the cursor the previous page answered;
// `limit` as the dashboard's lists read it), counted over the same day as the Overview's.
export async function troublePage(reads: Reads, raw: Record<string, unknown>, rule: HealthReading, now = new Date()): Promise<Page<EndpointTrouble>> {
  return reads.mayLag(async (sql) => {
    const { limit } = pageQuery({ limit: raw.limit });
    let after: TroubleKey | null = null;
    if (raw.after !== undefined && raw.after !== '') {
      const match = typeof raw.after === 'string' ? TROUBLE_KEY.exec(raw.after) : null;
      if (!match) throw invalid('after must be a cursor taken from the list', 'after');
      after = { failingOnly: match[1] === '1', micros: match[2]!, username: match[3]! };
    }
    const rows = await endpointsInTrouble(sql, dayStart(now), rule.stalledAfterMs, after, limit + 1);
    const items = rows.slice(0, limit);
    return { items: items.map(troubleOf(rule)), next: rows.length > limit ? items.at(-1)!.cursor : null };
  });
}

// The bin for the day's data: the finest that spans from the first delivery to now in MAX_BINS.
function binsFor(first: Date | null, since: Date, now: Date) {
  const spanMs = first ? now.getTime() - first.getTime() : OVERVIEW_HOURS * HOUR_MS;
  const minutes = BIN_MINUTES.find((m) => spanMs < m * MINUTE_MS * MAX_BINS) ?? 60;
  const binMs = minutes * MINUTE_MS;
  const last = Math.floor(now.getTime() / binMs) * binMs;
  const start = first ? Math.min(Math.floor(first.getTime() / binMs) * binMs, last - (MIN_BINS - 1) * binMs) : since.getTime();
  return { minutes, start: Math.max(start, since.getTime()), count: Math.floor((last - Math.max(start, since.getTime())) / binMs) + 1 };
}

export async function overview(reads: Reads, rule: HealthReading, now = new Date()): Promise<Overview> {
  return reads.mayLag(async (sql) => {
    const { stalledAfterMs } = rule;
    const since = dayStart(now);
    const inDay = filterSql(sql, { ...NO_FILTER, from: since }, stalledAfterMs);
    // Ids sort by the time they were written: the day's first delivery is the first by id.
    const [firstRow] = await sql<{ at: Date }[]>`select d.created_at as at from deliveries d where true ${inDay} order by d.id limit 1`;
    const bin = binsFor(firstRow?.at ?? null, since, now);
    const binStart = new Date(bin.start);
    const doorbellMs = sql`extract(epoch from d.notified_at - d.created_at) * 1000`;
    const [bins, trouble, groups, stalledAgents, closeRequests, [holds], [attempts], endpoints] = await Promise.all([
      // One row per bin, and (at null) one for them all.
      sql<(Omit<OverviewBin, 'at'> & { at: Date | null })[]>`
        with day as (
          select date_bin(${bin.minutes} * interval '1 minute', d.created_at, timestamptz '2000-01-01 00:00+00') as at,
                 d.step, d.next_attempt_at, d.webhook, d.notified_at, d.created_at
          from deliveries d
          where true ${inDay}
        )
        select d.at,
               (count(*) filter (where d.step = 'accepted' and not d.webhook and not (${retryingSql(sql)})))::int as "waitingForPoll",
               (count(*) filter (where d.step = 'accepted' and d.webhook and not (${retryingSql(sql)})))::int as "doorbellOwed",
               (count(*) filter (where ${retryingSql(sql)}))::int as retrying,
               (count(*) filter (where d.step = 'notified'))::int as notified,
               (count(*) filter (where d.step = 'delivered'))::int as delivered,
               (count(*) filter (where d.step = 'fetched'))::int as fetched,
               (count(*) filter (where d.step = 'failed'))::int as failed,
               round(percentile_cont(0.5) within group (order by ${doorbellMs}) filter (where d.webhook and d.notified_at is not null))::int
                 as "doorbellP50Ms",
               round(percentile_cont(0.95) within group (order by ${doorbellMs}) filter (where d.webhook and d.notified_at is not null))::int
                 as "doorbellP95Ms"
        from day d
        group by grouping sets ((d.at), ())
        order by 1 nulls first`,
      endpointsInTrouble(sql, since, stalledAfterMs, null, OVERVIEW_LIST_LIMIT),
      // Every webhook in trouble, by the kind of its last failure (failureKind reads no further than
      // the error's first colon); from the partial index of failing endpoints.
      sql<{ status: number | null; error: string | null; endpoints: number; disabled: number }[]>`
        select h.last_failure_status as status, split_part(h.last_failure_error, ':', 1) as error,
               count(*)::int as endpoints, (count(*) filter (where a.webhook_disabled_at is not null))::int as disabled
        from endpoint_health h join agents a on a.id = h.agent_id
        where h.failing_since is not null and a.webhook_url is not null and a.archived_at is null
        group by 1, 2`,
      sql<{ username: string; stalled: number; oldestNotifiedAt: Date; agents: number }[]>`
        select a.username, count(*)::int as stalled, min(d.notified_at) as "oldestNotifiedAt", (count(*) over ())::int as agents
        from deliveries d join agents a on a.id = d.recipient_id
        where ${stalledSql(sql, stalledAfterMs)}
        group by a.username
        order by count(*) desc, a.username
        limit ${OVERVIEW_LIST_LIMIT}`,
      sql<{ threadId: string; title: string; requestedAt: Date | null }[]>`
        select id as "threadId", title, close_requested_at as "requestedAt"
        from threads where state = 'close-pending'
        order by close_requested_at nulls last, id
        limit ${OVERVIEW_LIST_LIMIT}`,
      // Each from its small partial index (sql/025, sql/026).
      sql<{ waiting: number; paused: { threadId: string; title: string; pausedAt: string }[] }[]>`
        select (select count(*) from held_messages where state = 'held')::int as waiting,
               coalesce((select json_agg(json_build_object('threadId', p.id, 'title', p.title, 'pausedAt', p.paused_at) order by p.paused_at, p.id)
                         from (select id, title, paused_at from threads where paused_at is not null
                               order by paused_at, id limit ${OVERVIEW_LIST_LIMIT}) p), '[]') as paused`,
      // The day's windows of every endpoint (a day of 5-minute windows each).
      sql<{ attempts: number; successes: number }[]>`
        select coalesce(sum(attempts), 0)::int as attempts, coalesce(sum(successes), 0)::int as successes
        from endpoint_attempt_windows where window_start >= ${new Date(now.getTime() - OVERVIEW_HOURS * HOUR_MS)}`,
      countEndpoints(sql, rule),
    ]);
    const all = bins.find((b) => b.at === null) ?? { ...EMPTY_BIN, at: null };
    const byBin = new Map(bins.filter((b) => b.at !== null).map((b) => [b.at!.getTime(), b]));
    const binMs = bin.minutes * MINUTE_MS;
    const kinds = new Map<string, { failure: string; endpoints: number; disabled: number }>();
    for (const g of groups) {
      const failure = failureKind(g);
      const seen = kinds.get(failure) ?? { failure, endpoints: 0, disabled: 0 };
      kinds.set(failure, { failure, endpoints: seen.endpoints + g.endpoints, disabled: seen.disabled + g.disabled });
    }
    return {
      since: since.toISOString(),
      headline: {
        deliveries: all.waitingForPoll + all.doorbellOwed + all.retrying + all.notified + all.delivered + all.fetched + all.failed,
        failed: all.failed,
        attempts: attempts!.attempts,
        attemptsFailed: attempts!.attempts - attempts!.successes,
        endpoints,
        stalledAgents: stalledAgents[0]?.agents ?? 0,
      },
      binMinutes: bin.minutes,
      bins: Array.from({ length: bin.count }, (_, i) => {
        const at = binStart.getTime() + i * binMs;
        const { at: _at, ...figures } = byBin.get(at) ?? EMPTY_BIN;
        return { at: new Date(at).toISOString(), ...figures };
      }),
      doorbellP50Ms: all.doorbellP50Ms,
      doorbellP95Ms: all.doorbellP95Ms,
      trouble: trouble.map(troubleOf(rule)),
      troubleTotal: groups.reduce((n, g) => n + g.endpoints, 0),
      troubleGroups: [...kinds.values()].sort((a, b) => b.endpoints - a.endpoints || a.failure.localeCompare(b.failure)),
      stalledAgents: stalledAgents.map(({ agents: _agents, ...s }) => ({ ...s, oldestNotifiedAt: s.oldestNotifiedAt.toISOString() })),
      closeRequests: closeRequests.map((c) => ({ ...c, requestedAt: iso(c.requestedAt) })),
      holds: { waiting: holds!.waiting, paused: holds!.paused.map((p) => ({ ...p, pausedAt: new Date(p.pausedAt).toISOString() })) },
    };
  });
}

const EMPTY_BIN = {
  at: new Date(0),
  waitingForPoll: 0,
  doorbellOwed: 0,
  retrying: 0,
  notified: 0,
  delivered: 0,
  fetched: 0,
  failed: 0,
  doorbellP50Ms: null,
  doorbellP95Ms: null,
};
