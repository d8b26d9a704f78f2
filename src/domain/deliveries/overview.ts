import type { Sql } from '../../db/connect';
import { endpointStateSql } from '../agents/endpoint-health';
import { iso } from '../shared/iso-time';
import { NO_FILTER, filterSql } from './delivery-query';
import { retryingSql, stalledSql } from './delivery-states';
import { failureKind } from './retry-policy';
import { attemptedSince } from './delivery-steps';

// What the dashboard's overview shows first: how deliveries fared hour by hour over the last day
// and how long their doorbells took, the webhooks in trouble (one line each: who, what fails,
// how many deliveries it held up, since when), the agents whose handlers do not report, the
// threads waiting for a person's decision on closing, how many messages wait for a person's
// approval, and the threads the loop breaker paused.

export const OVERVIEW_HOURS = 24;
// Lines in each list; the lists behind them (Agents, Deliveries, Threads) have the rest.
export const OVERVIEW_LIST_LIMIT = 10;

export type OverviewHour = {
  at: string;
  // Deliveries accepted in the hour, by where each is now.
  accepted: number;
  retrying: number;
  notified: number;
  delivered: number;
  fetched: number;
  failed: number;
  // From acceptance to the handler's 2xx, for the hour's deliveries whose doorbell was answered.
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
  warnedStage: number;
  // Deliveries to it accepted in the overview's day that failed or wait for a retry after an
  // attempt in this failing spell; `countedSince` is the later of the spell's start and the day's.
  deliveries: number;
  countedSince: string;
};

export type Overview = {
  since: string;
  hours: OverviewHour[];
  trouble: EndpointTrouble[];
  stalledAgents: { username: string; stalled: number; oldestNotifiedAt: string }[];
  closeRequests: { threadId: string; title: string; requestedAt: string | null }[];
  holds: { waiting: number; paused: { threadId: string; title: string; pausedAt: string }[] };
};

const HOUR_MS = 3_600_000;

export async function overview(sql: Sql, stalledAfterMs: number, now = new Date()): Promise<Overview> {
  const since = new Date(Math.floor(now.getTime() / HOUR_MS) * HOUR_MS - (OVERVIEW_HOURS - 1) * HOUR_MS);
  const inDay = filterSql(sql, { ...NO_FILTER, from: since }, stalledAfterMs);
  const doorbellMs = sql`extract(epoch from d.notified_at - d.created_at) * 1000`;
  const [hours, trouble, stalledAgents, closeRequests, [holds]] = await Promise.all([
    sql<(Omit<OverviewHour, 'at'> & { at: Date })[]>`
      select date_bin('1 hour', d.created_at, timestamptz '2000-01-01 00:00+00') as at,
             (count(*) filter (where d.step = 'accepted' and not (${retryingSql(sql)})))::int as accepted,
             (count(*) filter (where ${retryingSql(sql)}))::int as retrying,
             (count(*) filter (where d.step = 'notified'))::int as notified,
             (count(*) filter (where d.step = 'delivered'))::int as delivered,
             (count(*) filter (where d.step = 'fetched'))::int as fetched,
             (count(*) filter (where d.step = 'failed'))::int as failed,
             round(percentile_cont(0.5) within group (order by ${doorbellMs}) filter (where d.webhook and d.notified_at is not null))::int
               as "doorbellP50Ms",
             round(percentile_cont(0.95) within group (order by ${doorbellMs}) filter (where d.webhook and d.notified_at is not null))::int
               as "doorbellP95Ms"
      from deliveries d
      where true ${inDay}
      group by 1 order by 1`,
    sql<(Omit<EndpointTrouble, 'failure' | 'failingSince' | 'disabledAt' | 'countedSince'> & {
      status: number | null; error: string | null; failingSince: Date; disabledAt: Date | null; countedSince: Date;
    })[]>`
      select a.username, a.webhook_url as url, ${endpointStateSql(sql, 'a', 'h')} as state,
             h.last_failure_status as status, h.last_failure_error as error, h.failing_since as "failingSince",
             a.webhook_disabled_at as "disabledAt", h.warned_stage as "warnedStage",
             greatest(h.failing_since, ${since}) as "countedSince",
             (select count(*) from deliveries d
              where d.recipient_id = a.id and (d.step = 'failed' or ${retryingSql(sql)}) ${inDay}
                and ${attemptedSince(sql, sql`h.failing_since`)})::int as deliveries
      from endpoint_health h join agents a on a.id = h.agent_id
      where h.failing_since is not null and a.webhook_url is not null and a.archived_at is null
      order by a.webhook_disabled_at is null, h.failing_since, a.username
      limit ${OVERVIEW_LIST_LIMIT}`,
    sql<{ username: string; stalled: number; oldestNotifiedAt: Date }[]>`
      select a.username, count(*)::int as stalled, min(d.notified_at) as "oldestNotifiedAt"
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
  ]);
  const byHour = new Map(hours.map((h) => [h.at.getTime(), h]));
  return {
    since: since.toISOString(),
    hours: Array.from({ length: OVERVIEW_HOURS }, (_, i) => {
      const at = since.getTime() + i * HOUR_MS;
      const { at: _at, ...figures } = byHour.get(at) ?? EMPTY_HOUR;
      return { at: new Date(at).toISOString(), ...figures };
    }),
    trouble: trouble.map(({ status, error, failingSince, disabledAt, countedSince, ...t }) => ({
      ...t,
      failure: failureKind({ status, error }),
      failingSince: failingSince.toISOString(),
      disabledAt: iso(disabledAt),
      countedSince: countedSince.toISOString(),
    })),
    stalledAgents: stalledAgents.map((s) => ({ ...s, oldestNotifiedAt: s.oldestNotifiedAt.toISOString() })),
    closeRequests: closeRequests.map((c) => ({ ...c, requestedAt: iso(c.requestedAt) })),
    holds: { waiting: holds!.waiting, paused: holds!.paused.map((p) => ({ ...p, pausedAt: new Date(p.pausedAt).toISOString() })) },
  };
}

const EMPTY_HOUR = {
  at: new Date(0),
  accepted: 0,
  retrying: 0,
  notified: 0,
  delivered: 0,
  fetched: 0,
  failed: 0,
  doorbellP50Ms: null,
  doorbellP95Ms: null,
};
