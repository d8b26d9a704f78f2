import type { Task } from 'graphile-worker';
import type { Sql } from '../db/connect';
import { makeDue } from '../db/job-queue';
import { announceDeliveryChanges } from '../domain/announce';
import { owedDoorbell, owedPreparedAttempt, forgetNextAttempt, recordDoorbellAttempts, recordInterruptedAttempt } from '../domain/delivery-steps';
import { requeueNotifyJob } from '../domain/notify-jobs';
import type { Logger } from '../log';
import { doorbellBody, type DoorbellFields } from './doorbell';
import type { WebhookCredentials } from './credentials';
import type { EndpointSlots } from './endpoint-slots';
import { afterAttempt } from './retry';
import { sendDoorbell, type SendOptions } from './send';
import { doorbellHeaders } from './sign';

export type NotifyDeps = {
  sql: Sql;
  log: Logger;
  send: Omit<SendOptions, 'signal'>;
  retryDelaysMs: number[];
  // Called with the delay of every retry that was scheduled, so the pool can wake up for it.
  onRetryScheduled: (delayMs: number) => void;
  credentials: WebhookCredentials;
  slots: EndpointSlots;
  // How long a parked doorbell waits at most, should the process that parked it not wake it
  // (it stopped, or died).
  parkedForMs: number;
  // Tells the pool a job fell due now, where LISTEN/NOTIFY cannot announce it.
  nudge: () => void;
};

// What a post puts in its doorbell jobs (domain/messages.ts): the notification as it stood then.
type PreparedDoorbell = Omit<DoorbellFields, 'deliveryId' | 'content'> & { recipientId: string; url: string; webhookVersion: string };
type NotifyPayload = { deliveryId: string; doorbell?: PreparedDoorbell };

// A doorbell prepared by the post rings without loading the message and the secret when this
// worker already holds the secret of the webhook it was prepared for; whether it is still owed is
// asked all the same (one indexed look-up), so it never rings for a recipient who has left.
// Anything else (a retry, a re-publish, a webhook changed since, a secret not yet known) is loaded
// whole, the question included.
async function ringable(deps: NotifyDeps, payload: NotifyPayload) {
  const prepared = payload.doorbell;
  const known = prepared && deps.credentials.get(prepared.recipientId, prepared.webhookVersion);
  if (prepared && known && known.url === prepared.url) {
    const owed = await owedPreparedAttempt(deps.sql, payload.deliveryId, prepared.webhookVersion);
    if (!owed) return null;
    const { messageId, threadId, threadTitle, sender, summary } = prepared;
    const fields = { deliveryId: payload.deliveryId, messageId, threadId, threadTitle, sender, summary, content: '' };
    return { fields, url: known.url, secret: known.secret, ...owed, prepared: true };
  }
  const loaded = await owedDoorbell(deps.sql, payload.deliveryId);
  if (!loaded) return null;
  deps.credentials.remember(loaded.recipientId, loaded.webhookVersion, { url: loaded.url, secret: loaded.secret });
  return { ...loaded, prepared: false };
}

// One doorbell attempt. Failures of the handler are not thrown: the attempt is recorded and the
// next one scheduled (or the delivery failed) in one statement, on the contract's schedule
// rather than graphile-worker's. Only an unexpected database error is thrown, leaving the job to
// graphile-worker's own retries.
export const notifyTask =
  (deps: NotifyDeps): Task =>
  async (rawPayload, helpers) => {
    const payload = rawPayload as NotifyPayload;
    // Run before and not finished: the previous run's attempt goes into the log first.
    if (helpers.job.attempts > 1) await recordInterruptedAttempt(deps.sql, deps.log, payload.deliveryId, deps.retryDelaysMs.length + 1);
    const doorbell = await ringable(deps, payload);
    if (!doorbell) return forgetNextAttempt(deps.sql, payload.deliveryId);
    const release = deps.slots.take(doorbell.url) ?? (await deps.slots.waitForSlot(doorbell.url, WAIT_FOR_QUICK_SLOT_MS));
    if (!release) {
      deps.slots.parked(doorbell.url, await requeueNotifyJob(deps.sql, payload, deps.parkedForMs));
      // Every slot may have freed while it was being parked, with nothing left to wake it.
      if (deps.slots.hasFree(doorbell.url)) void wakeParked(deps, doorbell.url);
      return;
    }
    try {
      await ring(deps, doorbell, helpers.abortSignal);
    } finally {
      release();
      void wakeParked(deps, doorbell.url);
    }
  };

// How long a doorbell over the cap of an endpoint that answers quickly waits for its next slot
// before it is parked instead.
const WAIT_FOR_QUICK_SLOT_MS = 250;

// The endpoint's oldest doorbell parked here is made due now. One that already ran (its backstop
// came first) is skipped for the next; a database error leaves them to their backstop.
async function wakeParked(deps: NotifyDeps, endpoint: string) {
  try {
    for (let id = deps.slots.nextParked(endpoint); id; id = deps.slots.nextParked(endpoint)) {
      if ((await makeDue(deps.sql, [id])) > 0) return deps.nudge();
    }
  } catch (error) {
    deps.log.warn('parked_doorbell_wake_failed', { endpoint: new URL(endpoint).origin, error: (error as Error).message });
  }
}

type Ringable = NonNullable<Awaited<ReturnType<typeof ringable>>>;

async function ring(deps: NotifyDeps, doorbell: Ringable, signal: AbortSignal | undefined) {
  const { deliveryId } = doorbell.fields;
  const body = doorbellBody(doorbell.fields);
  const attemptedAt = new Date();
  const started = performance.now();
  const outcome = await sendDoorbell(
    { url: doorbell.url, body, headers: doorbellHeaders({ deliveryId, body, secret: doorbell.secret, timestamp: attemptedAt }) },
    { ...deps.send, signal },
  );
  // Shutting down mid-request: record nothing and let graphile-worker hand the job to another worker.
  if (signal?.aborted) throw new Error('Worker shut down while the doorbell was in flight.');
  const durationMs = Math.round(performance.now() - started);
  const { publish, attempt, resend } = doorbell;
  const next = afterAttempt(outcome, attempt, deps.retryDelaysMs);
  deps.log.info('doorbell_attempt', {
    deliveryId, publish, attempt, resend, prepared: doorbell.prepared, status: outcome.status, error: outcome.error, durationMs, next: next.kind,
  });
  const retried = await recordDoorbellAttempts(deps.sql, {
    deliveryId,
    publish,
    attempt,
    resend,
    attemptedAt,
    durationMs,
    status: outcome.status,
    error: outcome.error,
    responseBody: outcome.responseBody ?? null,
    requestHeaders: outcome.requestHeaders ?? {},
    notified: next.kind === 'notified',
    failure: next.kind === 'failed' ? next.error : null,
    retryDelayMs: next.kind === 'retry' ? next.delayMs : null,
  });
  announceDeliveryChanges(deps.sql, deps.log, [deliveryId]);
  // The running job is locked, so graphile-worker moves the key to the retry and retires this one.
  if (next.kind === 'retry' && retried) deps.onRetryScheduled(next.delayMs);
}
