import type { Task } from 'graphile-worker';
import type { StatementPool } from '../db/batcher';
import type { Sql } from '../db/connect';
import { isDatabaseUnavailable } from '../db/unavailable';
import { owedDoorbell, owedPreparedAttempt, forgetNextAttempt, recordAttempt, recordInterruptedAttempt, type AttemptNumbers } from '../domain/deliveries/delivery-steps';
import { parkNotifyJob, parkedNotifyEndpoints, wakeParkedNotifyJobs } from '../domain/deliveries/notify-jobs';
import type { Logger } from '../log';
import type { Metrics } from '../metrics';
import { doorbellBody, type DoorbellFields } from '../domain/deliveries/doorbell-body';
import type { WebhookCredentials } from './credentials';
import { endpointOf, type EndpointSlots } from './endpoint-slots';
import { afterAttempt, type RetryPolicy } from '../domain/deliveries/retry-policy';
import { sendDoorbell, type SendOptions } from './send';
import { doorbellHeaders } from '../domain/deliveries/doorbell-signature';

export type NotifyDeps = {
  sql: Sql;
  // The two statements every doorbell sends go to connections that keep their plans, or to the
  // shared pool while those are away (db/plan-keeping-connection.ts).
  doorbellStatements: { owed: StatementPool; record: StatementPool };
  log: Logger;
  metrics?: Metrics;
  send: Omit<SendOptions, 'signal'>;
  retryPolicy: RetryPolicy;
  // Called with the delay of every retry that was scheduled, so the pool can wake up for it.
  onRetryScheduled: (delayMs: number) => void;
  credentials: WebhookCredentials;
  slots: EndpointSlots;
  // How long a parked doorbell waits at most, should the process that parked it not wake it
  // (it stopped, or died).
  parkedForMs: number;
  // Tells the pool that jobs fell due now, where LISTEN/NOTIFY cannot announce them.
  nudge: (count: number) => void;
};

// What a post puts in its doorbell jobs (domain/messages/messages.ts): the notification as it stood then.
// `secretVersion` is absent from a job a release before secret rotation added.
type PreparedDoorbell = Omit<DoorbellFields, 'deliveryId' | 'content'> & { recipientId: string; url: string; webhookVersion: string; secretVersion?: string };
// A parked job carries the endpoint it waits for, so that whoever frees a slot there can wake it.
// `atOnce`: the post's own process was to ring it (ring-at-once.ts), so a queue's run of it is not
// its first (domain/deliveries/doorbells-at-once.ts).
export type NotifyPayload = { deliveryId: string; doorbell?: PreparedDoorbell; parked?: boolean; endpoint?: string; atOnce?: boolean };

// The job a run is for, as the queue's fetch took it (the ringer's, not taken by anyone yet, has no
// attempt counted).
export type TakenJob = { id: string; attempts: number; last_error: string | null };
// Who took the job: a worker from the queue, or the ringer of the process that posted it
// (ring-at-once.ts).
type PickedUp = 'queue' | 'at once';

// The error a run throws when the worker shuts down while its doorbell is on the wire.
const SHUT_DOWN_MID_SEND = 'Worker shut down while the doorbell was in flight.';
export const cutOnTheWire = (error: Error) => error.message === SHUT_DOWN_MID_SEND;

// A run before this one was cut off mid-attempt: it was taken and never finished (the process was
// killed, so graphile-worker recorded no error) or it was cancelled on the wire by a shutdown. A
// run that failed on a database error before sending has its error recorded and is no attempt. A
// doorbell its post's process was to ring at once may have gone out before any attempt was
// counted on its job: the queue's first run of one counts as a second.
const previousRunCutOff = (job: TakenJob, payload: NotifyPayload) =>
  job.attempts > (payload.atOnce ? 0 : 1) && (job.last_error === null || job.last_error.includes(SHUT_DOWN_MID_SEND));

// A doorbell prepared by the post rings without loading the message and the secret when this
// worker already holds the secret of the webhook it was prepared for; whether it is still owed is
// asked all the same (one indexed look-up), so it never rings for a recipient who has left, unless
// the post's own commit answered that a moment ago (`owedAtCommit`: rung at once by the process that
// posted it, ring-at-once.ts). Both answers carry the secrets' version, which the post read or the
// question reads now: secrets rotated since this worker learned them are loaded again. Anything
// else (a retry, a re-publish, a webhook changed since, a secret not yet known) is loaded whole,
// the question included.
async function ringable(deps: NotifyDeps, payload: NotifyPayload, owedAtCommit: AttemptNumbers | undefined) {
  const prepared = payload.doorbell;
  const known = prepared && deps.credentials.get(prepared.recipientId, prepared.webhookVersion);
  if (prepared && known && known.url === prepared.url) {
    const owed = owedAtCommit
      ? { ...owedAtCommit, secretVersion: prepared.secretVersion }
      : await owedPreparedAttempt(deps.doorbellStatements.owed, payload.deliveryId, prepared.webhookVersion);
    if (!owed) return null;
    if (owed.secretVersion === known.secretVersion) {
      const { messageId, threadId, threadTitle, sender, summary, files } = prepared;
      const fields = { deliveryId: payload.deliveryId, messageId, threadId, threadTitle, sender, summary, content: '', files };
      const endpoint = { agentId: prepared.recipientId, webhookVersion: prepared.webhookVersion, url: known.url };
      const { publish, attempt, resend } = owed;
      return { fields, url: known.url, secrets: known.secrets, endpoint, publish, attempt, resend, prepared: true };
    }
  }
  const loaded = await owedDoorbell(deps.sql, payload.deliveryId);
  if (!loaded) return null;
  deps.credentials.remember(loaded.recipientId, loaded.webhookVersion, { url: loaded.url, secrets: loaded.secrets, secretVersion: loaded.secretVersion });
  const endpoint = { agentId: loaded.recipientId, webhookVersion: loaded.webhookVersion, url: loaded.url };
  return { ...loaded, endpoint, prepared: false };
}

export type Notifier = {
  task: Task;
  // A run of the job outside the queue's worker (the ringer's, for a doorbell owed when its post
  // committed), which throws what the task would.
  run: (payload: NotifyPayload, job: TakenJob, signal: AbortSignal, owedAtCommit?: AttemptNumbers) => Promise<void>;
  // Wakes, for every endpoint with doorbells parked in the queue (by any process, a dead one
  // included), as many as this process has free slots for there. Run when the worker starts,
  // after a dead worker's jobs are given back, and every PARKED_SWEEP_MS.
  // Answers how many were woken.
  wakeEveryParked: () => Promise<number>;
};

// One doorbell attempt. Failures of the handler are not thrown: the attempt is recorded and the
// next one scheduled (or the delivery failed) in one statement, on the contract's schedule
// rather than graphile-worker's. Only an unexpected database error is thrown, leaving the job to
// graphile-worker's own retries.
export const notifier = (deps: NotifyDeps): Notifier => {
  // Endpoints this process parked doorbells for, or ran parked doorbells of, or found parked: a
  // freed slot there asks the queue for parked ones; elsewhere no query is made. Each is noted with
  // the number of the last park seen, so that a wake-up that found none forgets the endpoint only
  // if no doorbell was parked for it meanwhile (one whose park committed after the wake-up's
  // query, and that would then never be woken by this process).
  const parkedFor = new Map<string, number>();
  let parks = 0;
  const noteParked = (endpoint: string) => parkedFor.set(endpoint, ++parks);

  // Makes due up to `count` doorbells parked for the endpoint, by any process, oldest first. A
  // database error leaves them to the next sweep.
  const wakeParked = async (endpoint: string, count: number): Promise<number> => {
    const seen = parkedFor.get(endpoint);
    if (count <= 0 || seen === undefined) return 0;
    try {
      const woken = await wakeParkedNotifyJobs(deps.sql, endpoint, count);
      if (woken < count && parkedFor.get(endpoint) === seen) parkedFor.delete(endpoint);
      if (woken > 0) deps.nudge(woken);
      return woken;
    } catch (error) {
      deps.log.warn('parked_doorbell_wake_failed', { endpoint, error: (error as Error).message });
      return 0;
    }
  };

  const wakeEveryParked = async () => {
    let woken = 0;
    for (const endpoint of await parkedNotifyEndpoints(deps.sql)) {
      noteParked(endpoint);
      woken += await wakeParked(endpoint, deps.slots.free(endpoint));
    }
    return woken;
  };

  // One run of the job. `interrupted` records, once, an attempt a previous run was cut off in.
  const runOnce = async (
    payload: NotifyPayload,
    job: TakenJob,
    signal: AbortSignal | undefined,
    pickedUp: PickedUp,
    owedAtCommit: AttemptNumbers | undefined,
    interrupted: { recorded: boolean },
  ) => {
    if (!interrupted.recorded && previousRunCutOff(job, payload)) {
      await recordInterruptedAttempt(deps.sql, deps.log, deps.retryPolicy, payload.deliveryId);
    }
    interrupted.recorded = true;
    const doorbell = await ringable(deps, payload, owedAtCommit);
    if (!doorbell) {
      await forgetNextAttempt(deps.sql, payload.deliveryId, job.id);
      // Woken to take a slot it no longer needs: the wake-up passes on to the next parked one.
      if (payload.endpoint) await wakeParked(payload.endpoint, 1);
      return;
    }
    const endpoint = endpointOf(doorbell.url);
    const release = deps.slots.take(doorbell.url) ?? (await deps.slots.waitForSlot(doorbell.url, WAIT_FOR_QUICK_SLOT_MS));
    if (!release) {
      await parkNotifyJob(deps.sql, { deliveryId: payload.deliveryId, doorbell: payload.doorbell }, endpoint, deps.parkedForMs, job.id);
      noteParked(endpoint);
      // Slots may have freed while it was being parked, with nothing left to wake it.
      await wakeParked(endpoint, deps.slots.free(doorbell.url));
      return;
    }
    try {
      await ring(deps, doorbell, job.id, signal, pickedUp);
    } finally {
      release();
      void wakeParked(endpoint, deps.slots.free(doorbell.url));
    }
  };

  // A run that fails because the database is away (a connection cut, one that never completes
  // after an outage) is run again once the database answers, for up to DATABASE_WAIT_MS. Failed
  // instead, the job would lose an attempt and wait e^attempts seconds for the next (20 s after the
  // third, 55 s after the fourth), and after the fifth be left to the re-publish sweep. A doorbell
  // sent before the record of it failed is sent once more, as after a crash.
  const run = async (payload: NotifyPayload, job: TakenJob, signal: AbortSignal | undefined, owedAtCommit?: AttemptNumbers) => {
    if (payload.endpoint) noteParked(payload.endpoint);
    const pickedUp = owedAtCommit ? 'at once' : 'queue';
    const interrupted = { recorded: false };
    const deadline = Date.now() + DATABASE_WAIT_MS;
    for (;;) {
      try {
        return await runOnce(payload, job, signal, pickedUp, owedAtCommit, interrupted);
      } catch (error) {
        if (!isDatabaseUnavailable(error) || !(await databaseAnswers(deps.sql, deadline, signal))) throw error;
        deps.log.warn('doorbell_run_again', { deliveryId: payload.deliveryId, error: (error as Error).message });
        // After an outage the commit's answer is old news: the run asks again.
        owedAtCommit = undefined;
      }
    }
  };
  const task: Task = (payload, helpers) => run(payload as NotifyPayload, helpers.job, helpers.abortSignal);
  return { task, run, wakeEveryParked };
};

// How long a run waits for the database to come back before it fails its job.
export const DATABASE_WAIT_MS = 30_000;
const DATABASE_POLL_MS = 500;

// Whether the database answers before the deadline (and before a shutdown), asked every half second.
async function databaseAnswers(sql: Sql, deadline: number, signal: AbortSignal | undefined): Promise<boolean> {
  while (Date.now() < deadline && !signal?.aborted) {
    try {
      await sql`select 1`;
      return true;
    } catch (error) {
      if (!isDatabaseUnavailable(error)) throw error;
    }
    await Bun.sleep(DATABASE_POLL_MS);
  }
  return false;
}

// How long a doorbell over the cap of an endpoint that answers quickly waits for its next slot
// before it is parked instead.
const WAIT_FOR_QUICK_SLOT_MS = 250;

type Ringable = NonNullable<Awaited<ReturnType<typeof ringable>>>;

async function ring(deps: NotifyDeps, doorbell: Ringable, job: string, signal: AbortSignal | undefined, pickedUp: PickedUp) {
  const { deliveryId } = doorbell.fields;
  const body = doorbellBody(doorbell.fields);
  const attemptedAt = new Date();
  const started = performance.now();
  const outcome = await sendDoorbell(
    { url: doorbell.url, body, headers: doorbellHeaders({ deliveryId, body, secrets: doorbell.secrets, timestamp: attemptedAt }) },
    { ...deps.send, signal },
  );
  // Cancelled on the wire by a shutdown: record nothing and let graphile-worker hand the job to
  // another worker (which logs this attempt as cut off). An answer that came first is recorded.
  if (signal?.aborted && outcome.status === null) throw new Error(SHUT_DOWN_MID_SEND);
  const durationMs = Math.round(performance.now() - started);
  const { publish, attempt, resend } = doorbell;
  const next = afterAttempt(outcome, attempt, deps.retryPolicy);
  deps.metrics?.doorbellAttempt(next.kind, outcome.status, (performance.now() - started) / 1000);
  deps.log.info('doorbell_attempt', {
    deliveryId, publish, attempt, resend, prepared: doorbell.prepared, pickedUp, status: outcome.status, error: outcome.error, durationMs, next: next.kind,
  });
  const retryQueued = await recordAttempt(deps.doorbellStatements.record, {
    deliveryId, endpoint: doorbell.endpoint, publish, attempt, resend, attemptedAt, durationMs, outcome, next, job,
  });
  if (next.kind === 'retry' && retryQueued) deps.onRetryScheduled(next.delayMs);
}
