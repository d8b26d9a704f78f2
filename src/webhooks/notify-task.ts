import type { Task } from 'graphile-worker';
import type { Sql } from '../db/connect';
import { announceDeliveryChanges } from '../domain/announce';
import { addNotifyJobs } from '../domain/notify-jobs';
import type { Logger } from '../log';
import { doorbellBody } from './doorbell';
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
};

// One doorbell attempt. Failures of the handler are not thrown: the attempt is recorded and the
// next one scheduled (or the delivery failed) in one statement, on the contract's schedule
// rather than graphile-worker's. Only an unexpected database error is thrown, leaving the job to
// graphile-worker's own retries.
export const notifyTask =
  (deps: NotifyDeps): Task =>
  async (payload, helpers) => {
    const { deliveryId } = payload as { deliveryId: string };
    const { sql } = deps;
    // The attempt's numbers are read here, not when it is recorded: the job key allows one live
    // job per delivery, so nothing else moves them while this one runs.
    const [d] = await sql`
      select d.id as "deliveryId", d.message_id as "messageId", d.thread_id as "threadId", t.title as "threadTitle",
             m.sender, m.summary, m.content, a.webhook_url as url, a.signing_secret as secret,
             d.publish_attempts as publish, d.send_attempts + 1 as attempt
      from deliveries d
      join agents a on a.id = d.recipient_id
      join messages m on m.id = d.message_id
      join threads t on t.id = d.thread_id
      where d.id = ${deliveryId} and ${owesDoorbell(sql)}`;
    if (!d) return;
    const body = doorbellBody(d as Parameters<typeof doorbellBody>[0]);
    const attemptedAt = new Date();
    const started = performance.now();
    const outcome = await sendDoorbell(
      { url: d.url, body, signature: signature(body, d.secret) },
      { ...deps.send, signal: helpers.abortSignal },
    );
    // Shutting down mid-request: record nothing and let graphile-worker hand the job to another worker.
    if (helpers.abortSignal?.aborted) throw new Error('Worker shut down while the doorbell was in flight.');
    const attempt = { deliveryId, publish: d.publish as number, attempt: d.attempt as number };
    await recordAttempt(deps, attempt, { ...outcome, attemptedAt, durationMs: Math.round(performance.now() - started) });
  };

type Attempt = AttemptOutcome & { attemptedAt: Date; durationMs: number };

// The attempt logged, the send count and the step moved, and the retry queued, in one statement:
// one round trip, and no connection held idle in a transaction while the pool is busy. Raising
// send_attempts keeps the dashboard trigger quiet; the change is announced after the commit.
async function recordAttempt(
  deps: NotifyDeps,
  { deliveryId, publish, attempt }: { deliveryId: string; publish: number; attempt: number },
  outcome: Attempt,
) {
  const { sql } = deps;
  const { attemptedAt, durationMs } = outcome;
  const next = afterAttempt(outcome, attempt, deps.retryDelaysMs);
  deps.log.info('doorbell_attempt', {
    deliveryId, publish, attempt, status: outcome.status, error: outcome.error, durationMs, next: next.kind,
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
    ), job as (${addNotifyJobs(sql, 'retry', next.kind === 'retry' ? next.delayMs : 0)})
    select (select count(*)::int from job) as retried`;
  announceDeliveryChanges(sql, [deliveryId]);
  // The running job is locked, so graphile-worker moves the key to the retry and retires this one.
  if (next.kind === 'retry' && row!.retried > 0) deps.onRetryScheduled(next.delayMs);
}
