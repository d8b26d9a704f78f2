import type { Task } from 'graphile-worker';
import { batchedStatement } from '../db/batcher';
import type { Sql } from '../db/connect';
import { announceDeliveryChanges } from '../domain/announce';
import { inIdOrder } from '../domain/deliveries';
import { addNotifyJobs, webhookVersion } from '../domain/notify-jobs';
import type { Logger } from '../log';
import { doorbellBody, type DoorbellFields } from './doorbell';
import type { WebhookCredentials } from './credentials';
import { owesDoorbell } from './owed';
import { afterAttempt, type AttemptOutcome } from './retry';
import { sendDoorbell, type SendOptions } from './send';
import { signature } from './sign';

export type NotifyDeps = {
  sql: Sql;
  log: Logger;
  send: Omit<SendOptions, 'signal'>;
  retryDelaysMs: number[];
  // Called with the delay of every retry that was scheduled, so the pool can wake up for it.
  onRetryScheduled: (delayMs: number) => void;
  credentials: WebhookCredentials;
};

// What a post puts in its doorbell jobs (domain/messages.ts): the notification as it stood then.
type PreparedDoorbell = Omit<DoorbellFields, 'deliveryId' | 'content'> & { recipientId: string; url: string; webhookVersion: string };
type NotifyPayload = { deliveryId: string; doorbell?: PreparedDoorbell };

// A doorbell rings at once, without loading the delivery first, when the job is the post's own,
// fresh and on its first run, and this worker already holds the secret of the webhook it was
// prepared for. Otherwise (a retry, a re-publish, a job given back after a crash, one that waited
// in a backlog, a webhook changed since) everything is loaded and checked again. The price of the
// fast way: for up to FRESH_FOR_MS after a webhook is removed or changed, or the delivery moves
// on, a doorbell prepared before may still ring, as one already on its way would have.
export const FRESH_FOR_MS = 2_000;

export function preparedDoorbell(
  payload: NotifyPayload,
  job: { attempts: number; created_at: Date; locked_at: Date | null },
  credentials: WebhookCredentials,
): { fields: DoorbellFields; url: string; secret: string } | null {
  const prepared = payload.doorbell;
  // Both times are the database's: the worker's own clock may be set differently.
  if (!prepared || job.attempts !== 1 || !job.locked_at || job.locked_at.getTime() - job.created_at.getTime() > FRESH_FOR_MS) return null;
  const known = credentials.get(prepared.recipientId, prepared.webhookVersion);
  if (!known || known.url !== prepared.url) return null;
  const { messageId, threadId, threadTitle, sender, summary } = prepared;
  return { fields: { deliveryId: payload.deliveryId, messageId, threadId, threadTitle, sender, summary, content: '' }, url: known.url, secret: known.secret };
}

// One doorbell attempt. Failures of the handler are not thrown: the attempt is recorded and the
// next one scheduled (or the delivery failed) in one statement, on the contract's schedule
// rather than graphile-worker's. Only an unexpected database error is thrown, leaving the job to
// graphile-worker's own retries.
export const notifyTask =
  (deps: NotifyDeps): Task =>
  async (rawPayload, helpers) => {
    const payload = rawPayload as NotifyPayload;
    const { deliveryId } = payload;
    const ready = preparedDoorbell(payload, helpers.job, deps.credentials);
    const doorbell = ready
      ? { ...ready, publish: 1, attempt: 1 }
      : await loadDoorbell(deps, deliveryId);
    if (!doorbell) return;
    const body = doorbellBody(doorbell.fields);
    const attemptedAt = new Date();
    const started = performance.now();
    const outcome = await sendDoorbell(
      { url: doorbell.url, body, signature: signature(body, doorbell.secret) },
      { ...deps.send, signal: helpers.abortSignal },
    );
    // Shutting down mid-request: record nothing and let graphile-worker hand the job to another worker.
    if (helpers.abortSignal?.aborted) throw new Error('Worker shut down while the doorbell was in flight.');
    const attempt = { deliveryId, publish: doorbell.publish, attempt: doorbell.attempt, prepared: ready !== null };
    await recordAttempt(deps, attempt, { ...outcome, attemptedAt, durationMs: Math.round(performance.now() - started) });
  };

// The attempt's numbers are read here, not when it is recorded: the job key allows one live job
// per delivery, so nothing else moves them while this one runs. Null when no doorbell is owed.
async function loadDoorbell({ sql, credentials }: NotifyDeps, deliveryId: string) {
  const [d] = await sql`
    select d.id as "deliveryId", d.message_id as "messageId", d.thread_id as "threadId", t.title as "threadTitle",
           m.sender, m.summary, m.content, a.webhook_url as url, a.signing_secret as secret,
           a.id as "recipientId", ${webhookVersion(sql, 'a')} as "webhookVersion",
           d.publish_attempts as publish, d.send_attempts + 1 as attempt
    from deliveries d
    join agents a on a.id = d.recipient_id
    join messages m on m.id = d.message_id
    join threads t on t.id = d.thread_id
    where d.id = ${deliveryId} and ${owesDoorbell(sql)}`;
  if (!d) return null;
  credentials.remember(d.recipientId, d.webhookVersion, { url: d.url, secret: d.secret });
  return { fields: d as DoorbellFields, url: d.url as string, secret: d.secret as string, publish: d.publish as number, attempt: d.attempt as number };
}

type Attempt = AttemptOutcome & { attemptedAt: Date; durationMs: number };

type AttemptRecord = {
  deliveryId: string;
  publish: number;
  attempt: number;
  attemptedAt: Date;
  durationMs: number;
  status: number | null;
  error: string | null;
  notified: boolean;
  failure: string | null;
  retryDelayMs: number | null;
};

async function recordAttempt(
  deps: NotifyDeps,
  { deliveryId, publish, attempt, prepared }: { deliveryId: string; publish: number; attempt: number; prepared: boolean },
  outcome: Attempt,
) {
  const { attemptedAt, durationMs } = outcome;
  const next = afterAttempt(outcome, attempt, deps.retryDelaysMs);
  deps.log.info('doorbell_attempt', {
    deliveryId, publish, attempt, prepared, status: outcome.status, error: outcome.error, durationMs, next: next.kind,
  });
  const retried = await recordAttempts(deps.sql, {
    deliveryId,
    publish,
    attempt,
    attemptedAt,
    durationMs,
    status: outcome.status,
    error: outcome.error,
    notified: next.kind === 'notified',
    failure: next.kind === 'failed' ? next.error : null,
    retryDelayMs: next.kind === 'retry' ? next.delayMs : null,
  });
  announceDeliveryChanges(deps.sql, deps.log, [deliveryId]);
  // The running job is locked, so graphile-worker moves the key to the retry and retires this one.
  if (next.kind === 'retry' && retried) deps.onRetryScheduled(next.delayMs);
}

// Each attempt logged, its delivery's send count and step moved, and its retry queued, in one
// statement: no connection held idle in a transaction while the pool is busy. Steps only move
// forward: a handler that reported delivered, or an agent that read the message, got there first
// and keeps its step; the attempt is logged all the same, and a notified_at is kept even then,
// since the answer did come. Raising send_attempts keeps the dashboard trigger quiet; the changes
// are announced after the commit. Answers, per record, whether its retry was queued.
// Attempts that finish together are recorded by one statement, as concurrent posts are written:
// one commit for many doorbells instead of one each.
const recordAttempts = batchedStatement(insertAttempts);

async function insertAttempts(sql: Sql, records: AttemptRecord[]): Promise<boolean[]> {
  // One JSON document for the whole batch: postgres.js serialises an array parameter by the
  // element type it infers or is told, which turns nulls and booleans in typed arrays into NaN
  // and false.
  const input = sql.json(
    records.map((r) => ({
      delivery_id: r.deliveryId,
      publish: r.publish,
      attempt: r.attempt,
      attempted_at: r.attemptedAt.toISOString(),
      duration_ms: r.durationMs,
      status: r.status,
      error: r.error,
      notified: r.notified,
      failure: r.failure,
      retry_delay_ms: r.retryDelayMs,
    })),
  );
  const rows = await sql<{ id: string }[]>`
    with input as (
      select * from jsonb_to_recordset(${input}) as i(
        delivery_id uuid, publish int, attempt int, attempted_at timestamptz, duration_ms int, status int,
        error text, notified boolean, failure text, retry_delay_ms int)
    ), logged as (
      insert into delivery_attempts (delivery_id, publish, attempt, attempted_at, duration_ms, status, error)
      select delivery_id, publish, attempt, attempted_at, duration_ms, status, error from input
    ), moved as (
      update deliveries d set
        send_attempts = i.attempt,
        notified_at = case when i.notified then coalesce(d.notified_at, now()) else d.notified_at end,
        step = case when d.step <> 'accepted' then d.step
                    when i.notified then 'notified'::delivery_step
                    when i.failure is not null then 'failed'::delivery_step
                    else d.step end,
        failed_step = case when d.step = 'accepted' and i.failure is not null then 'accepted'::delivery_step
                           else d.failed_step end,
        error = case when d.step = 'accepted' and i.failure is not null then i.failure else d.error end
      from input i
      where d.id = i.delivery_id and d.id in (${inIdOrder(sql, sql`id in (select delivery_id from input)`)})
      returning d.id, d.step, i.retry_delay_ms
    ), retry as (
      select id, true as webhook, retry_delay_ms from moved where retry_delay_ms is not null and step = 'accepted'
    ), job as (${addNotifyJobs(sql, 'retry', { delayColumn: 'retry_delay_ms' })})
    select id from retry where (select count(*) from job) > 0`;
  const retried = new Set(rows.map((r) => r.id));
  return records.map((r) => retried.has(r.deliveryId));
}
