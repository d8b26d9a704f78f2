import type { Task } from 'graphile-worker';
import type { Sql } from '../db/connect';
import { announceDeliveryChanges } from '../domain/announce';
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
  job: { attempts: number; created_at: Date },
  credentials: WebhookCredentials,
  now = Date.now(),
): { fields: DoorbellFields; url: string; secret: string } | null {
  const prepared = payload.doorbell;
  if (!prepared || job.attempts !== 1 || now - job.created_at.getTime() > FRESH_FOR_MS) return null;
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

// The attempt logged, the send count and the step moved, and the retry queued, in one statement:
// one round trip, and no connection held idle in a transaction while the pool is busy. Raising
// send_attempts keeps the dashboard trigger quiet; the change is announced after the commit.
async function recordAttempt(
  deps: NotifyDeps,
  { deliveryId, publish, attempt, prepared }: { deliveryId: string; publish: number; attempt: number; prepared: boolean },
  outcome: Attempt,
) {
  const { sql } = deps;
  const { attemptedAt, durationMs } = outcome;
  const next = afterAttempt(outcome, attempt, deps.retryDelaysMs);
  deps.log.info('doorbell_attempt', {
    deliveryId, publish, attempt, prepared, status: outcome.status, error: outcome.error, durationMs, next: next.kind,
  });
  const notified = next.kind === 'notified';
  const failure = next.kind === 'failed' ? next.error : null;
  // Steps only move forward: a handler that reported delivered, or an agent that read the message,
  // got there first and keeps its step; the attempt is logged all the same. A notified_at is kept
  // even then, since the answer did come.
  const [row] = await sql<{ retried: number }[]>`
    with logged as (
      insert into delivery_attempts (delivery_id, publish, attempt, attempted_at, duration_ms, status, error)
      values (${deliveryId}, ${publish}, ${attempt}, ${attemptedAt}, ${durationMs}, ${outcome.status}, ${outcome.error})
    ), moved as (
      update deliveries set
        send_attempts = ${attempt},
        notified_at = case when ${notified} then coalesce(notified_at, now()) else notified_at end,
        step = case when step <> 'accepted' then step
                    when ${notified} then 'notified'::delivery_step
                    when ${failure}::text is not null then 'failed'::delivery_step
                    else step end,
        failed_step = case when step = 'accepted' and ${failure}::text is not null then 'accepted'::delivery_step
                           else failed_step end,
        error = case when step = 'accepted' and ${failure}::text is not null then ${failure} else error end
      where id = ${deliveryId}
      returning id, step
    ), retry as (
      select id, true as webhook from moved where ${next.kind === 'retry'} and step = 'accepted'
    ), job as (${addNotifyJobs(sql, 'retry', { delayMs: next.kind === 'retry' ? next.delayMs : 0 })})
    select (select count(*)::int from job) as retried`;
  announceDeliveryChanges(sql, [deliveryId]);
  // The running job is locked, so graphile-worker moves the key to the retry and retires this one.
  if (next.kind === 'retry' && row!.retried > 0) deps.onRetryScheduled(next.delayMs);
}
