import type { Queries, Sql } from '../../db/connect';
import { answeredOk, describeOutcome } from './retry-policy';
import { isRetrying, isStalled, stallsAt } from './delivery-states';
import { oneLine } from '../messages/summary-line';
import { filterSql, type DeliveryFilter } from './delivery-query';
import { doorbellBody } from './doorbell-body';
import { hasParkedNotifyJob } from './notify-jobs';
import { isId } from '../shared/ids';
import { iso } from '../shared/iso-time';
import { keyBounds, pageOf, type PageQuery } from '../shared/keyset';
import { LIMITS, type DeliveryStep, type Page } from '../shared/schemas';

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
  // Where it went (null for attempts logged before the address was kept, and for cut-off ones).
  url: string | null;
  // The handler's answer's headers; null when no answer came.
  responseHeaders: Record<string, string> | null;
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
  // When a Notified delivery will read as stalled if no delivered report comes first, so that a
  // page can look again then rather than on a timer of its own.
  stallsAt: string | null;
  // Between two attempts: the last one failed and the next is queued for `nextAttemptAt`.
  retrying: boolean;
  nextAttemptAt: string | null;
  // Its doorbell is due but waits for a free slot at its endpoint (the per-endpoint cap), not for
  // a time: a page says so instead of showing nextAttemptAt, which has passed.
  waitingForSlot: boolean;
  lastError: string | null;
  createdAt: string;
  notifiedAt: string | null;
  deliveredAt: string | null;
  fetchedAt: string | null;
  acknowledgedAt: string | null;
  // The doorbell's body, the same bytes on every attempt; null for a polling recipient.
  payload: string | null;
  attempts: Attempt[];
};

type ProgressRow = {
  id: string;
  messageId: string;
  threadId: string;
  thread: string;
  sender: string;
  summary: string | null;
  content: string;
  files: number;
  messageCreatedAt: Date;
  recipient: string;
  step: DeliveryStep;
  failedStep: DeliveryStep | null;
  error: string | null;
  webhook: boolean;
  createdAt: Date;
  nextAttemptAt: Date | null;
  waitingForSlot: boolean;
  notifiedAt: Date | null;
  deliveredAt: Date | null;
  fetchedAt: Date | null;
  acknowledgedAt: Date | null;
  // Built as json: its times are PostgreSQL's text, not yet the ISO form of Attempt.
  attempts: Attempt[];
};

// The select of ProgressRow, for a where clause to follow.
const selectProgress = (sql: Queries) => sql`
  select d.id, d.message_id as "messageId", d.thread_id as "threadId", t.title as thread, m.sender, m.summary,
         m.content, (select count(*)::int from message_files mf where mf.message_id = m.id) as files, m.created_at as "messageCreatedAt", a.username as recipient, d.step, d.failed_step as "failedStep",
         d.error, d.webhook, d.created_at as "createdAt", d.next_attempt_at as "nextAttemptAt", d.notified_at as "notifiedAt",
         d.delivered_at as "deliveredAt", d.fetched_at as "fetchedAt", d.acknowledged_at as "acknowledgedAt",
         d.step = 'accepted' and d.webhook and ${hasParkedNotifyJob(sql)} as "waitingForSlot",
         coalesce((select json_agg(json_build_object('attemptedAt', x.attempted_at, 'publish', x.publish,
                                                     'attempt', x.attempt, 'resend', x.resend, 'status', x.status,
                                                     'durationMs', x.duration_ms, 'error', x.error,
                                                     'responseBody', x.response_body, 'requestHeaders', x.request_headers,
                                                     'interrupted', x.interrupted, 'url', x.url,
                                                     'responseHeaders', x.response_headers) order by x.id)
                   from delivery_attempts x where x.delivery_id = d.id), '[]') as attempts
  from deliveries d
  join messages m on m.id = d.message_id
  join threads t on t.id = d.thread_id
  join agents a on a.id = d.recipient_id`;

function toProgress(r: ProgressRow, stalledAfterMs: number): DeliveryProgress {
  const notifiedAt = iso(r.notifiedAt);
  const delivery = {
    id: r.id,
    messageId: r.messageId,
    threadId: r.threadId,
    thread: r.thread,
    sender: r.sender,
    summary: oneLine(r.summary, r.content, LIMITS.webhookSummary),
    messageCreatedAt: r.messageCreatedAt.toISOString(),
    recipient: r.recipient,
    step: r.step,
    failedStep: r.failedStep,
    error: r.error,
    webhook: r.webhook,
    nextAttemptAt: iso(r.nextAttemptAt),
    waitingForSlot: r.waitingForSlot,
    createdAt: r.createdAt.toISOString(),
    notifiedAt,
    deliveredAt: iso(r.deliveredAt),
    fetchedAt: iso(r.fetchedAt),
    acknowledgedAt: iso(r.acknowledgedAt),
  };
  const attempts = r.attempts.map((a) => ({ ...a, attemptedAt: iso(a.attemptedAt) }));
  const last = attempts.at(-1);
  const lastError = last && !answeredOk(last.status) ? describeOutcome(last) : null;
  const payload = delivery.webhook
    ? doorbellBody({ deliveryId: r.id, messageId: r.messageId, threadId: r.threadId, threadTitle: r.thread, sender: r.sender, summary: r.summary, content: r.content, files: r.files })
    : null;
  return {
    ...delivery,
    stalled: isStalled(delivery, stalledAfterMs),
    stallsAt: stallsAt(delivery, stalledAfterMs)?.toISOString() ?? null,
    retrying: isRetrying(delivery),
    lastError,
    payload,
    attempts,
  };
}

// One page of the deliveries matching the filter, one per row, newest first.
export async function listDeliveries(
  sql: Queries,
  filter: DeliveryFilter,
  page: PageQuery,
  stalledAfterMs: number,
): Promise<Page<DeliveryProgress>> {
  const rows = await sql<ProgressRow[]>`
    ${selectProgress(sql)}
    where true ${filterSql(sql, filter, stalledAfterMs)} ${keyBounds(sql, sql`d.id`, page)}
    order by d.id desc
    limit ${page.limit + 1}`;
  return pageOf(
    rows.map((r) => toProgress(r, stalledAfterMs)),
    page.limit,
    (d) => d.id,
  );
}

// How many Failed deliveries the filter shows, and the newest of them: a bulk resend confirmed
// for that many resends none that failed after the count was taken.
export async function failedInView(sql: Queries, filter: DeliveryFilter, stalledAfterMs: number): Promise<{ failed: number; upTo: string | null }> {
  const [row] = await sql<{ failed: number; upTo: string | null }[]>`
    select count(*)::int as failed, max(d.id::text) as "upTo"
    from deliveries d
    join messages m on m.id = d.message_id
    join threads t on t.id = d.thread_id
    join agents a on a.id = d.recipient_id
    where d.step = 'failed' ${filterSql(sql, filter, stalledAfterMs)}`;
  return row!;
}

// The current progress of the given deliveries (the live feed's payload).
export async function deliveryProgress(sql: Sql, ids: string[], stalledAfterMs: number): Promise<DeliveryProgress[]> {
  const valid = ids.filter(isId);
  if (valid.length === 0) return [];
  const rows = await sql<ProgressRow[]>`${selectProgress(sql)} where d.id = any(${valid}::uuid[]) order by d.id`;
  return rows.map((r) => toProgress(r, stalledAfterMs));
}
