import type { Queries, Sql } from '../../db/connect';
import { isId } from '../shared/ids';
import { answeredOk, describeOutcome, type AttemptOutcome } from '../deliveries/retry-policy';

// What operators are told on their webhooks (operator-webhooks.ts says where): an agent's webhook
// warned about, switched off, or back; messages waiting for approval; a thread paused by the loop
// breaker; and a test a person asked for. A notice is queued by the transaction of the event it
// tells of, one row and one job per operator webhook, so that it is sent exactly when the event
// commits, by whichever worker takes the job, even after this process dies. The worker
// (webhooks/operator-notice-task.ts) signs and sends it, records every attempt here, and a failed
// attempt queues the next one after OPERATOR_WEBHOOK_RETRY_DELAYS_MS in the same statement.

// sql/031_operator_notices.sql queues its jobs under this name (operator_notice_jobs).
export const OPERATOR_NOTICE_TASK = 'operator_notice';

// What a failed endpoint last answered: the status (or what went wrong on the wire) and the first
// bytes of the handler's answer.
export type EndpointReason = { status: number | null; error: string | null; answer: string | null };

export type OperatorNotice =
  | {
      event: 'endpoint.warned';
      agent: string;
      url: string;
      // The stage reached, of how many (WEBHOOK_WARN_AFTER_MS).
      stage: number;
      stages: number;
      failingSince: string;
      // When it will be switched off unless it answers; null when it never is.
      switchesOffAt: string | null;
      reason: EndpointReason;
    }
  | { event: 'endpoint.switched_off'; agent: string; url: string; failingSince: string; reason: EndpointReason }
  | {
      event: 'endpoint.back';
      agent: string;
      url: string;
      // `answered`: it answered 2xx again; `switched_on`: a person (`by`) switched it back on.
      how: 'answered' | 'switched_on';
      by: string | null;
      at: string;
    }
  | {
      event: 'holds.waiting';
      waiting: number;
      // Messages that started waiting since the last notice of them.
      fresh: number;
      oldestAt: string;
      oldest: { sender: string; threadTitle: string; line: string } | null;
    }
  | { event: 'thread.loop_broken'; threadId: string; title: string; pausedAt: string; messages: number; windowMinutes: number }
  | { event: 'test'; requestedBy: string; at: string };

export type OperatorEvent = OperatorNotice['event'];
export const OPERATOR_EVENTS: OperatorEvent[] = ['endpoint.warned', 'endpoint.switched_off', 'endpoint.back', 'holds.waiting', 'thread.loop_broken', 'test'];

// Queues `notice` for every operator webhook (or only `webhookId`'s), in the caller's transaction:
// it goes out if and when that transaction commits. Answers how many were queued (0 with no operator
// webhook). Notices about an agent's webhook also remember what operators were told, so that they
// hear once when it is back (endpointsBack).
export async function queueOperatorNotice(tx: Queries, notice: OperatorNotice, webhookId?: string): Promise<number> {
  const [row] = await tx<{ queued: number }[]>`
    select queue_operator_notice(${notice.event}::text, ${tx.json(notice as never)}::jsonb, ${webhookId ?? null}::uuid) as queued`;
  if (notice.event === 'endpoint.warned' || notice.event === 'endpoint.switched_off') {
    const told = notice.event === 'endpoint.warned' ? 'warned' : 'switched_off';
    await tx`
      insert into operator_endpoint_alerts (agent_id, told)
      select id, ${told} from agents where username = ${notice.agent}
      on conflict (agent_id) do update set told = excluded.told, told_at = now()`;
  } else if (notice.event === 'endpoint.back') {
    await tx`delete from operator_endpoint_alerts e using agents a where a.id = e.agent_id and a.username = ${notice.agent}`;
  }
  return row?.queued ?? 0;
}

// Agents' webhooks operators were told are failing or switched off that answered 2xx since, and are
// switched on: each is told once as back (an `endpoint.back` notice queued in the same transaction).
// Run by the worker's minutely endpoint sweep, so the notice is at most a minute late.
export async function endpointsBack(sql: Sql): Promise<string[]> {
  return sql.begin(async (tx) => {
    // A webhook removed, or its agent archived, will not be back: nothing to tell.
    await tx`
      delete from operator_endpoint_alerts e using agents a
      where a.id = e.agent_id and (a.webhook_url is null or a.archived_at is not null)`;
    const back = await tx<{ agent: string; url: string; at: Date }[]>`
      delete from operator_endpoint_alerts e
      using agents a, endpoint_health h
      where a.id = e.agent_id and h.agent_id = e.agent_id
        and a.webhook_url is not null and a.webhook_disabled_at is null
        and h.failing_since is null and h.last_success_at > e.told_at
      returning a.username as agent, a.webhook_url as url, h.last_success_at as at`;
    for (const b of back) {
      await queueOperatorNotice(tx, { event: 'endpoint.back', agent: b.agent, url: b.url, how: 'answered', by: null, at: b.at.toISOString() });
    }
    return back.map((b) => b.agent);
  });
}

// The first bytes of a failed endpoint's answer that a notice quotes.
export const ANSWER_CHARS = 200;

// What each of these agents' webhooks last answered when it failed: the status and error kept with
// its health, and the start of the answer's body from the newest failed attempt among its last
// deliveries and test events (bounded reads by the agent's indexes, whatever the log's size).
export async function endpointReasons(sql: Queries, agentIds: string[]): Promise<Map<string, EndpointReason>> {
  if (agentIds.length === 0) return new Map();
  const rows = await sql<{ agentId: string; status: number | null; error: string | null; answer: string | null }[]>`
    select a.id as "agentId", h.last_failure_status as status, h.last_failure_error as error,
           left((select x.body from (
             (select t.response_body as body, t.attempted_at as at from endpoint_test_events t
              where t.agent_id = a.id and t.attempted_at is not null and not coalesce(t.status between 200 and 299, false)
              order by t.id desc limit 1)
             union all
             (select da.response_body, da.attempted_at from (
                select d.id from deliveries d where d.recipient_id = a.id order by d.id desc limit 20) d
              cross join lateral (
                select x.response_body, x.attempted_at, x.status from delivery_attempts x where x.delivery_id = d.id order by x.id desc limit 1) da
              where not coalesce(da.status between 200 and 299, false)
              order by da.attempted_at desc limit 1)
           ) x order by x.at desc limit 1), ${ANSWER_CHARS}) as answer
    from agents a left join endpoint_health h on h.agent_id = a.id
    where a.id = any(${agentIds}::uuid[])`;
  return new Map(rows.map(({ agentId, ...r }) => [agentId, { ...r, answer: r.answer === null || r.answer === '' ? null : r.answer }]));
}

// A notice the worker is to send, or null: sent or given up already, this attempt recorded (a job
// run again after its process died), or its webhook removed.
export type NoticeToSend = {
  id: string;
  attempt: number;
  notice: OperatorNotice;
  createdAt: string;
  webhook: { id: string; url: string; format: 'slack' | 'json'; secret: string };
};

export async function noticeToSend(sql: Sql, noticeId: string, attempt: number): Promise<NoticeToSend | null> {
  if (!isId(noticeId)) return null;
  const [row] = await sql<{ id: string; notice: OperatorNotice; createdAt: Date; webhookId: string; url: string; format: 'slack' | 'json'; secret: string }[]>`
    select n.id, n.notice, n.created_at as "createdAt", w.id as "webhookId", w.url, w.format, w.secret
    from operator_notices n join operator_webhooks w on w.id = n.webhook_id
    where n.id = ${noticeId} and n.delivered_at is null and n.gave_up_at is null and n.attempts = ${attempt - 1}`;
  if (!row) return null;
  return {
    id: row.id,
    attempt,
    notice: row.notice,
    createdAt: row.createdAt.toISOString(),
    webhook: { id: row.webhookId, url: row.url, format: row.format, secret: row.secret },
  };
}

export type NoticeOutcome = 'delivered' | 'retrying' | 'gave_up';

// Records one attempt (its answer, the notice's state, the webhook's health) and, when it failed
// and a retry is left, queues the next attempt after its delay: one statement, so that an attempt
// is never recorded without its retry, nor retried unrecorded.
export async function recordNoticeAttempt(
  sql: Sql,
  sent: NoticeToSend,
  { attemptedAt, durationMs, outcome }: { attemptedAt: Date; durationMs: number; outcome: AttemptOutcome },
  retryDelaysMs: number[],
): Promise<NoticeOutcome> {
  const ok = answeredOk(outcome.status);
  const delayMs = ok ? undefined : retryDelaysMs[sent.attempt - 1];
  const result: NoticeOutcome = ok ? 'delivered' : delayMs === undefined ? 'gave_up' : 'retrying';
  const failure = ok ? null : describeOutcome(outcome);
  await sql`
    with attempt as (
      -- Nothing, when the webhook was removed meanwhile (its notices went with it).
      insert into operator_notice_attempts (notice_id, webhook_id, attempt, attempted_at, duration_ms, status, error, response_body)
      select id, webhook_id, ${sent.attempt}, ${attemptedAt}, ${durationMs}, ${outcome.status}, ${outcome.error}, ${outcome.responseBody ?? null}
      from operator_notices where id = ${sent.id}
    ), notice as (
      update operator_notices set attempts = ${sent.attempt},
        delivered_at = ${ok ? sql`now()` : sql`null`}, gave_up_at = ${result === 'gave_up' ? sql`now()` : sql`null`}
      where id = ${sent.id}
      returning id
    ), health as (
      update operator_webhooks set
        last_success_at = ${ok ? sql`greatest(last_success_at, ${attemptedAt})` : sql`last_success_at`},
        last_failure_at = ${ok ? sql`last_failure_at` : sql`greatest(last_failure_at, ${attemptedAt})`},
        last_failure = coalesce(${failure}, last_failure),
        failing_since = ${ok ? sql`null` : sql`coalesce(failing_since, ${attemptedAt})`}
      where id = ${sent.webhook.id}
    )
    select operator_notice_jobs(array(select id from notice where ${result === 'retrying'}), ${sent.attempt + 1}::int,
                                now() + ${delayMs ?? 0} * interval '1 millisecond')`;
  return result;
}
