import type { Sql } from '../db/connect';
import { isStalled, oneLine, stalledSql } from './deliveries';
import { isId } from './ids';
import { LIMITS } from './schemas';

// How far each delivery got, for the people watching: its step, whether it reads as stalled,
// where and why it failed, and every notification attempt.

export type Attempt = {
  attemptedAt: string;
  publish: number;
  attempt: number;
  // 0 for the original publish, k for a person's k-th resend.
  resend: number;
  status: number | null;
  durationMs: number;
  error: string | null;
  // The first KiB of the handler's answer.
  responseBody: string | null;
  // The headers that went out, signatures elided.
  requestHeaders: Record<string, string> | null;
  // The worker stopped or lost the database mid-attempt; its outcome is unknown.
  interrupted: boolean;
};

export type DeliveryProgress = {
  id: string;
  messageId: string;
  threadId: string;
  thread: string;
  sender: string;
  summary: string;
  messageCreatedAt: string;
  recipient: string;
  step: string;
  failedStep: string | null;
  error: string | null;
  webhook: boolean;
  stalled: boolean;
  // Between two attempts: the last one failed and the next is queued for `nextAttemptAt`.
  retrying: boolean;
  nextAttemptAt: string | null;
  lastError: string | null;
  createdAt: string;
  notifiedAt: string | null;
  deliveredAt: string | null;
  fetchedAt: string | null;
  acknowledgedAt: string | null;
  attempts: Attempt[];
};

export type MessageProgress = {
  id: string;
  threadId: string;
  thread: string;
  sender: string;
  summary: string;
  createdAt: string;
  deliveries: Omit<DeliveryProgress, 'messageId' | 'threadId' | 'thread' | 'sender' | 'summary' | 'messageCreatedAt'>[];
};

export type ProgressFilter = { failed?: boolean; retrying?: boolean; stalled?: boolean; agent?: string; threadId?: string };

const iso = (value: unknown) => (value ? new Date(value as string).toISOString() : null);

const selectProgress = (sql: Sql) => sql`
  select d.id, d.message_id as "messageId", d.thread_id as "threadId", t.title as thread, m.sender, m.summary,
         m.content, m.created_at as "messageCreatedAt", a.username as recipient, d.step, d.failed_step as "failedStep",
         d.error, d.webhook, d.created_at as "createdAt", d.next_attempt_at as "nextAttemptAt", d.notified_at as "notifiedAt",
         d.delivered_at as "deliveredAt", d.fetched_at as "fetchedAt", d.acknowledged_at as "acknowledgedAt",
         coalesce((select json_agg(json_build_object('attemptedAt', x.attempted_at, 'publish', x.publish,
                                                     'attempt', x.attempt, 'resend', x.resend, 'status', x.status,
                                                     'durationMs', x.duration_ms, 'error', x.error,
                                                     'responseBody', x.response_body, 'requestHeaders', x.request_headers,
                                                     'interrupted', x.interrupted) order by x.id)
                   from delivery_attempts x where x.delivery_id = d.id), '[]') as attempts
  from deliveries d
  join messages m on m.id = d.message_id
  join threads t on t.id = d.thread_id
  join agents a on a.id = d.recipient_id`;

function toProgress(r: Record<string, any>, stalledAfterMs: number): DeliveryProgress {
  const delivery = {
    id: r.id,
    messageId: r.messageId,
    threadId: r.threadId,
    thread: r.thread,
    sender: r.sender,
    summary: oneLine(r.summary, r.content, LIMITS.webhookSummary),
    messageCreatedAt: iso(r.messageCreatedAt)!,
    recipient: r.recipient,
    step: r.step,
    failedStep: r.failedStep,
    error: r.error,
    webhook: r.webhook,
    nextAttemptAt: iso(r.nextAttemptAt),
    createdAt: iso(r.createdAt)!,
    notifiedAt: iso(r.notifiedAt),
    deliveredAt: iso(r.deliveredAt),
    fetchedAt: iso(r.fetchedAt),
    acknowledgedAt: iso(r.acknowledgedAt),
    attempts: (r.attempts as Attempt[]).map((a) => ({ ...a, attemptedAt: iso(a.attemptedAt)! })),
  };
  const last = delivery.attempts.at(-1);
  const retrying = delivery.step === 'accepted' && delivery.nextAttemptAt !== null;
  const lastError = last && !(last.status !== null && last.status >= 200 && last.status < 300)
    ? (last.error ?? `the handler answered HTTP ${last.status}`)
    : null;
  return { ...delivery, stalled: isStalled(delivery, stalledAfterMs), retrying, lastError };
}

// The newest `limit` messages with at least one delivery matching the filter, newest first, each
// with its matching deliveries.
export async function listDeliveryProgress(
  sql: Sql,
  filter: ProgressFilter,
  limit: number,
  stalledAfterMs: number,
): Promise<MessageProgress[]> {
  if (filter.threadId !== undefined && !isId(filter.threadId)) return [];
  const matches = sql`
    ${filter.failed ? sql`and d.step = 'failed'` : sql``}
    ${filter.retrying ? sql`and d.step = 'accepted' and d.next_attempt_at is not null` : sql``}
    ${filter.stalled ? sql`and ${stalledSql(sql, stalledAfterMs)}` : sql``}
    ${filter.agent ? sql`and d.recipient_id = (select id from agents where username = ${filter.agent})` : sql``}
    ${filter.threadId ? sql`and d.thread_id = ${filter.threadId}` : sql``}`;
  const rows = await sql`
    with picked as (
      select m.id from messages m
      where exists (select 1 from deliveries d where d.message_id = m.id ${matches})
      order by m.id desc limit ${limit}
    )
    ${selectProgress(sql)}
    where d.message_id in (select id from picked) ${matches}
    order by d.message_id desc, a.username`;
  const messages = new Map<string, MessageProgress>();
  for (const row of rows) {
    const { messageId, threadId, thread, sender, summary, messageCreatedAt, ...delivery } = toProgress(row, stalledAfterMs);
    let message = messages.get(messageId);
    if (!message) {
      message = { id: messageId, threadId, thread, sender, summary, createdAt: messageCreatedAt, deliveries: [] };
      messages.set(messageId, message);
    }
    message.deliveries.push(delivery);
  }
  return [...messages.values()];
}

// The current progress of the given deliveries (the live feed's payload).
export async function deliveryProgress(sql: Sql, ids: string[], stalledAfterMs: number): Promise<DeliveryProgress[]> {
  const valid = ids.filter(isId);
  if (valid.length === 0) return [];
  const rows = await sql`${selectProgress(sql)} where d.id = any(${valid}::uuid[]) order by d.id`;
  return rows.map((r) => toProgress(r, stalledAfterMs));
}
