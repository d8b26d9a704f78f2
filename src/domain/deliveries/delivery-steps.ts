import { batchedStatement, type StatementPool } from '../../db/batcher';
import type { Queries, Sql } from '../../db/connect';
import type { Logger } from '../../log';
import { DELIVERY_CHANNEL, wakeAfterAttempts } from './delivery-wake-ups';
import { answeredOk, maxAttempts, GAVE_UP_AFTER_CUT_OFF_TEMPLATE, type AfterAttempt, type AttemptOutcome, type RetryPolicy } from './retry-policy';
import type { DoorbellFields } from './doorbell-body';
import { filterSql, type DeliveryFilter } from './delivery-query';
import { notFound, invalid } from '../shared/errors';
import { isId } from '../shared/ids';
import { recordDecision, type Decider } from '../people/audit';
import { addNotifyJobs, hasLiveNotifyJob, webhookVersion } from './notify-jobs';
import { retiredFirst, retireJobs } from '../../db/job-queue';
import { agentSeesThread } from '../threads/visibility';
import { recordEndpointHealth, webhookActive } from '../agents/endpoint-health';
import { secretsOf, secretVersion, signingSecretColumns, type SecretColumns, type SigningSecrets } from '../agents/signing-secrets';

// The one owner of a delivery's steps (Accepted → Notified → Delivered → Fetched, or Failed at the
// step reached) and of the question every writer asks: is a doorbell still owed? Posts, reports,
// reads, resends, the webhook worker and the re-publish sweep all move steps through here.
// sql/008 makes the database refuse a step moved backwards by anyone, a resend excepted.

// A delivery `d` (recipient `a`) can still reach its recipient while the recipient is not archived
// and still sees the thread (a participant, the thread not closed): the visibility rule agents meet
// on every route, so that a doorbell never announces what the delivered report would answer 404 to.
const recipientSees = (sql: Queries) => sql`
  a.archived_at is null and ${agentSeesThread(sql, sql`d.thread_id`, sql`d.recipient_id`)}`;

// Why a delivery cannot reach its recipient, for a person's resend; null exactly when it can.
const whyUnreachable = (sql: Queries) => sql`
  case when a.archived_at is not null then 'its recipient is archived'
       when exists (select 1 from threads ct where ct.id = d.thread_id and ct.state = 'closed') then 'its thread is closed'
       when not (${recipientSees(sql)}) then 'its recipient has left the thread'
  end`;

// A doorbell is owed while the delivery was accepted for a webhook, has not moved on or been
// acknowledged, its agent still has a webhook, and the recipient can still see it. A job that
// finds otherwise ends without sending, and the re-publish sweep skips it.
export const owesDoorbell = (sql: Queries) => sql`
  d.webhook and d.step = 'accepted' and d.acknowledged_at is null and ${webhookActive(sql, 'a')}
  and ${recipientSees(sql)}`;

// The deliveries `d` by their primary key, before anything else the statement asks of them. Asked
// together with the owed conditions, PostgreSQL 18 (after an autoanalyze) skip-scanned
// deliveries_inbox_idx (recipient_id, id) for the id instead, reading twenty times the buffers of
// the key: a doorbell's owed check went from 50 to 430 µs (docs/internals/performance-history.md, "Flat over time").
const deliveriesById = (sql: Queries, deliveryIds: string[]) =>
  sql`with d as materialized (select * from deliveries where id = any(${deliveryIds}::uuid[]))`;

export type OwedDoorbell = {
  fields: DoorbellFields;
  recipientId: string;
  webhookVersion: string;
  url: string;
  secrets: SigningSecrets;
  secretVersion: string;
} & AttemptNumbers;

// Which attempt this is: of which publish (the original counts as the first), within it, and of
// which resend by a person (0: none).
export type AttemptNumbers = { publish: number; attempt: number; resend: number };

// Everything a doorbell needs, or null when none is owed. The attempt's numbers are read here:
// the job key allows one live job per delivery, so nothing else moves them while it runs.
export async function owedDoorbell(sql: Sql, deliveryId: string): Promise<OwedDoorbell | null> {
  const [d] = await sql<(DoorbellFields & AttemptNumbers & SecretColumns & { url: string; recipientId: string; webhookVersion: string; secretVersion: string })[]>`
    ${deliveriesById(sql, [deliveryId])}
    select d.id as "deliveryId", d.message_id as "messageId", d.thread_id as "threadId", t.title as "threadTitle",
           m.sender, m.summary, m.content, a.webhook_url as url, ${signingSecretColumns(sql, 'a')},
           a.id as "recipientId", ${webhookVersion(sql, 'a')} as "webhookVersion", ${secretVersion(sql, 'a')} as "secretVersion",
           d.publish_attempts as publish, d.send_attempts + 1 as attempt, d.resends as resend,
           (select count(*)::int from message_files mf where mf.message_id = d.message_id) as files
    from d
    join agents a on a.id = d.recipient_id
    join messages m on m.id = d.message_id
    join threads t on t.id = d.thread_id
    where ${owesDoorbell(sql)}`;
  if (!d) return null;
  const { url, secret, previousSecret, previousSecretUntil, recipientId, webhookVersion: version, secretVersion: secretsVersion, publish, attempt, resend, ...fields } = d;
  const secrets = secretsOf({ secret, previousSecret, previousSecretUntil });
  return { fields, url, secrets, secretVersion: secretsVersion, recipientId, webhookVersion: version, publish, attempt, resend };
}

// The same question for a doorbell prepared by the post (its fields already in the job): still
// owed, and still for the webhook version it was prepared for? The attempt's numbers, or null;
// with them the secrets' version (signing-secrets.ts), so that a worker holding secrets since
// rotated loads them again.
// Doorbells that ask together share one statement (db/batcher.ts), as their attempts are recorded:
// one in flight, gathering every doorbell that asks in the same turn of the event loop (the jobs of
// one fetched batch start together). A drain of 4 000 in the bench asked in 536 statements instead
// of 1 104 (two in flight, each sent at once), one of the changes that took a doorbell from 766 to
// 527 µs of CPU, with no change to doorbell latency at 200/s (docs/internals/performance-history.md, "Fewer
// statements per doorbell").
export type OwedPrepared = AttemptNumbers & { secretVersion: string };
export const owedPreparedAttempt = (pool: StatementPool, deliveryId: string, version: string): Promise<OwedPrepared | null> =>
  askOwedPrepared(pool, { deliveryId, version });

const askOwedPrepared = batchedStatement(owedPreparedAttempts, { maxInFlight: 1, gather: true });

async function owedPreparedAttempts(sql: Sql, asked: { deliveryId: string; version: string }[]): Promise<(OwedPrepared | null)[]> {
  const rows = await sql<(OwedPrepared & { id: string; version: string })[]>`
    ${deliveriesById(sql, asked.map((a) => a.deliveryId))}
    select d.id, ${webhookVersion(sql, 'a')} as version, ${secretVersion(sql, 'a')} as "secretVersion",
           d.publish_attempts as publish, d.send_attempts + 1 as attempt, d.resends as resend
    from d join agents a on a.id = d.recipient_id
    where ${owesDoorbell(sql)}`;
  const owed = new Map(rows.map(({ id, version, ...numbers }) => [id, { version, numbers }]));
  return asked.map((a) => {
    const row = owed.get(a.deliveryId);
    return row && row.version === a.version ? row.numbers : null;
  });
}

export type AttemptEndpoint = { agentId: string; webhookVersion: string; url: string };

// One attempt as the worker reports it: which one it was, when, how long it took, what came back,
// and what the retry policy (retry-policy.ts) made of it.
export type AttemptReport = AttemptNumbers & {
  deliveryId: string;
  // The endpoint it went to: the recipient's webhook, as it stood when the doorbell was prepared.
  endpoint: AttemptEndpoint;
  attemptedAt: Date;
  durationMs: number;
  outcome: AttemptOutcome;
  next: AfterAttempt;
  // The queue job that made the attempt, retired by the statement that records it.
  job?: string;
};

// The worker's report of an attempt: the delivery moves, the attempt is logged and watchers are
// woken by the statement below. Answers whether the retry the policy called for was queued (none
// is while the doorbell is no longer owed).
export async function recordAttempt(pool: StatementPool, report: AttemptReport): Promise<boolean> {
  const { outcome, next, job, ...numbers } = report;
  return recordDoorbellAttempts(pool, {
    ...numbers,
    status: outcome.status,
    error: outcome.error,
    responseBody: outcome.responseBody ?? null,
    requestHeaders: outcome.requestHeaders ?? {},
    responseHeaders: outcome.responseHeaders ?? null,
    notified: next.kind === 'notified',
    failure: next.kind === 'failed' ? next.error : null,
    retryDelayMs: next.kind === 'retry' ? next.delayMs : null,
    job: job ?? null,
  });
}

type AttemptRecord = AttemptNumbers & {
  deliveryId: string;
  endpoint: AttemptEndpoint;
  attemptedAt: Date;
  durationMs: number;
  status: number | null;
  error: string | null;
  // The first KiB of the handler's answer, and the headers that went out (signatures elided).
  responseBody: string | null;
  requestHeaders: Record<string, string>;
  responseHeaders: Record<string, string> | null;
  notified: boolean;
  // The recorded error when this attempt fails the delivery.
  failure: string | null;
  retryDelayMs: number | null;
  job: string | null;
};

// Each attempt logged, its delivery's send count and step moved, its retry queued and its
// endpoint's health kept (endpoint-health.ts), in one statement: no connection held idle in a transaction while the pool is busy. Steps only move
// forward: a handler that reported delivered, or an agent that read the message, got there first
// and keeps its step; the attempt is logged all the same, and a notified_at is kept even then,
// since the answer did come. A retry is queued only while the doorbell is still owed. Raising
// send_attempts keeps the dashboard trigger quiet; the statement wakes the deliveries' watchers
// itself (delivery-wake-ups.ts, way 3). Attempts that finish together are recorded by one statement, as
// concurrent posts are written: one commit for many doorbells instead of one each. The jobs that
// made the attempts are retired in the same statement (job-queue.ts's retireJobs), before the
// retries take over their keys. Answers, per record, whether its retry was queued.
//
// One statement in flight rather than the batcher's usual two: two wait on each other anyway for
// the health rows of the endpoints they share (the second until the first commits), so one at a
// time records as many attempts a second in larger batches, for less work in PostgreSQL (a drain
// of 4 000 in the bench: 915 µs of PostgreSQL CPU per doorbell against 1 178 µs).
const recordDoorbellAttempts = batchedStatement(insertAttempts, { maxInFlight: 1 });

async function insertAttempts(sql: Sql, records: AttemptRecord[]): Promise<boolean[]> {
  // One JSON document for the whole batch: postgres.js serialises an array parameter by the
  // element type it infers or is told, which turns nulls and booleans in typed arrays into NaN
  // and false.
  const input = sql.json(
    records.map((r) => ({
      delivery_id: r.deliveryId,
      publish: r.publish,
      attempt: r.attempt,
      resend: r.resend,
      response_body: r.responseBody,
      request_headers: r.requestHeaders,
      response_headers: r.responseHeaders,
      agent_id: r.endpoint.agentId,
      webhook_version: r.endpoint.webhookVersion,
      url: r.endpoint.url,
      ok: answeredOk(r.status),
      attempted_at: r.attemptedAt.toISOString(),
      duration_ms: r.durationMs,
      status: r.status,
      error: r.error,
      notified: r.notified,
      failure: r.failure,
      retry_delay_ms: r.retryDelayMs,
    })),
  );
  // The deliveries are found by this array rather than by joining the JSON: PostgreSQL guesses
  // a function's result at 100 rows, and against that guess it scanned the whole deliveries table
  // (twice) for every batch, a cost that grew with every doorbell ever sent.
  const ids = records.map((r) => r.deliveryId);
  const jobs = records.flatMap((r) => (r.job ? [r.job] : []));
  const [row] = await sql<{ retried: string[] }[]>`
    with input as (
      select * from jsonb_to_recordset(${input}) as i(
        delivery_id uuid, publish int, attempt int, resend int, response_body text, request_headers jsonb,
        response_headers jsonb, agent_id uuid, webhook_version text, url text, ok boolean,
        attempted_at timestamptz, duration_ms int, status int, error text, notified boolean, failure text,
        retry_delay_ms int)
    ), logged as (
      insert into delivery_attempts (delivery_id, publish, attempt, resend, attempted_at, duration_ms, status, error,
                                     response_body, request_headers, response_headers, url)
      select delivery_id, publish, attempt, resend, attempted_at, duration_ms, status, error, response_body, request_headers,
             response_headers, url
      from input
    ), ${recordEndpointHealth(sql, 'input')}, moved as (
      update deliveries d set
        send_attempts = i.attempt,
        notified_at = case when i.notified then coalesce(d.notified_at, now()) else d.notified_at end,
        step = case when d.step <> 'accepted' then d.step
                    when i.notified then 'notified'::delivery_step
                    when i.failure is not null then 'failed'::delivery_step
                    else d.step end,
        failed_step = case when d.step = 'accepted' and i.failure is not null then 'accepted'::delivery_step
                           else d.failed_step end,
        error = case when d.step = 'accepted' and i.failure is not null then i.failure else d.error end,
        -- A retry is queued only while the doorbell is still owed (the values here are the row's
        -- before this update).
        next_attempt_at = case when i.retry_delay_ms is not null and ${owesDoorbell(sql)}
                               then now() + i.retry_delay_ms * interval '1 millisecond' end
      from input i, agents a
      where d.id = any(${ids}::uuid[]) and d.id = i.delivery_id and a.id = d.recipient_id
        and d.id in (${inIdOrder(sql, sql`id = any(${ids}::uuid[])`)})
      returning d.id, d.next_attempt_at is not null as retry, i.retry_delay_ms
    ), retired as (${retireJobs(sql, jobs)}
    ), retry as (
      -- After the retirement: add_jobs would otherwise move the key off a job being deleted.
      select id, true as webhook, retry_delay_ms from moved where retry and ${retiredFirst(sql)}
    ), job as (${addNotifyJobs(sql, 'retry', { delayColumn: 'retry_delay_ms' })}
    ), woken as (
      -- In this transaction, where a wake-up after the commit cost a statement of its own per
      -- batch (delivery-wake-ups.ts, way 3).
      select count(pg_notify(${DELIVERY_CHANNEL}, delivery_id::text)) as n from input)
    select array(select id from retry where (select count(*) from job) > 0) as retried, (select n from woken) as woken`;
  const retried = new Set(row!.retried);
  return records.map((r) => retried.has(r.deliveryId));
}

// A doorbell job that runs again after a run that never finished (the worker was killed, stopped
// or lost the database mid-attempt) first records that cut-off attempt, so that the log never
// hides one: the doorbell may or may not have reached the handler. It counts as an attempt, as
// it may well have been one; when it was the policy's last, the delivery is Failed. Recorded
// whether or not a doorbell is still owed (the handler may have reported delivered meanwhile).
export async function recordInterruptedAttempt(sql: Sql, log: Logger, policy: RetryPolicy, deliveryId: string): Promise<void> {
  const last = maxAttempts(policy);
  await sql`
    with d as (
      select id, step, publish_attempts, send_attempts + 1 as attempt, resends from deliveries
      where id = ${deliveryId} and webhook for update
    ), logged as (
      insert into delivery_attempts (delivery_id, publish, attempt, resend, duration_ms, status, error, interrupted)
      select id, publish_attempts, attempt, resends, 0, null, ${INTERRUPTED}, true from d
    )
    update deliveries set send_attempts = d.attempt,
      -- The contract's attempts are used up: no further one is sent.
      step = case when d.step = 'accepted' and d.attempt >= ${last} then 'failed' else deliveries.step end,
      failed_step = case when d.step = 'accepted' and d.attempt >= ${last} then 'accepted' else deliveries.failed_step end,
      error = case when d.step = 'accepted' and d.attempt >= ${last}
                   then format(${GAVE_UP_AFTER_CUT_OFF_TEMPLATE}, d.attempt)
                   else deliveries.error end
    from d where deliveries.id = d.id`;
  wakeAfterAttempts(sql, log, [deliveryId]);
}

// A retry's job that found no doorbell owed any more (the recipient left, say): nothing is due.
// The job (when a worker asks) is retired in the same statement.
export async function forgetNextAttempt(sql: Sql, deliveryId: string, job?: string): Promise<void> {
  await sql`
    with retired as (${retireJobs(sql, job ? [job] : [])})
    update deliveries set next_attempt_at = null where id = ${deliveryId} and next_attempt_at is not null`;
}

export const INTERRUPTED =
  "This attempt's outcome was never recorded: the worker stopped or lost the database while it ran, so the doorbell may or may not have reached the handler.";

// Rows of deliveries matching `where`, locked in id order. Every statement that updates several
// deliveries takes their locks this way (listing messages, recording doorbell attempts), so that
// two of them can never wait on each other.
export const inIdOrder = (sql: Queries, where: ReturnType<Sql>) =>
  sql`select id from deliveries where ${where} order by id for update`;

// Reading moves a delivery to Fetched whatever step it had reached (a failed doorbell included:
// the agent has the message now) and keeps the first read's time.
export const toFetched = (sql: Sql) => sql`
  step = 'fetched', failed_step = null, fetched_at = coalesce(fetched_at, now())`;

// The handler's report: the first report's time is kept by the caller's `delivered_at is null`.
// A Fetched delivery stays Fetched; a Failed one becomes Delivered, since the report proves the
// doorbell arrived (the recorded error is kept).
export const toDelivered = (sql: Sql) => sql`
  delivered_at = now(), step = case when step = 'fetched' then step else 'delivered' end, failed_step = null`;

// A person's second chance for Failed deliveries: back to Accepted with their attempts counted
// afresh (the attempt log is kept), and their doorbells published again in the same statement.
// Refused for any whose doorbell could never go out, by the same rule that decides what is owed.
// The rows are locked in id order, as every statement that updates several deliveries locks them.
// One row per delivery `where` picks: its step now, why it cannot be reached, whether it was resent.
async function resendWhere(sql: Queries, where: ReturnType<Sql>) {
  return sql<{ id: string; step: string; unreachable: string | null; changed: boolean }[]>`
    with target as (
      select d.id, d.step, ${webhookActive(sql, 'a')} as webhook, ${whyUnreachable(sql)} as unreachable
      from deliveries d join agents a on a.id = d.recipient_id
      where ${where}
      order by d.id
      for update of d
    ), resent as (
      update deliveries d set step = 'accepted', failed_step = null, webhook = target.webhook, resends = d.resends + 1,
                              next_attempt_at = null,
                              publish_attempts = case when target.webhook then 1 else 0 end, send_attempts = 0
      from target where d.id = target.id and target.step = 'failed' and target.unreachable is null
      returning d.id, d.webhook
    ), job as (${addNotifyJobs(sql, 'resent')})
    select target.id, case when resent.id is null then target.step::text else 'accepted' end as step, target.unreachable,
           resent.id is not null as changed, (select count(*) from job) as jobs
    from target left join resent on resent.id = target.id`;
}

export async function resendDelivery(sql: Sql, decider: Decider, deliveryId: string) {
  if (!isId(deliveryId)) throw notFound('No such delivery.');
  return sql.begin(async (tx) => {
    const [row] = await resendWhere(tx, tx`d.id = ${deliveryId}`);
    if (!row) throw notFound('No such delivery.');
    if (row.step !== 'failed' && !row.changed) throw invalid(`Only a failed delivery can be resent; this one is ${row.step}.`);
    // Resending would leave it at Accepted for good: nothing would ever send or read it.
    if (!row.changed) throw invalid(`This delivery cannot be resent: ${row.unreachable}.`);
    await recordDecision(tx, decider, { action: 'delivery.resend', subjectType: 'delivery', subject: deliveryId, before: { step: 'failed' }, after: { step: row.step } });
    return { deliveryId, step: row.step };
  });
}

export type BulkResend = {
  resent: number;
  // Failed deliveries the rule refused, counted by reason.
  refused: { reason: string; count: number }[];
};

// Every Failed delivery the filter shows, up to the newest a person counted before confirming
// (`upTo`), resent by the rule above in one statement: each is resent or refused, none half-way.
// Those that moved on meanwhile (a delivered report, a read) are neither. One decision on record
// when any was resent, named by `upTo`, with the filter that chose them and the outcome.
export async function resendFailed(sql: Sql, decider: Decider, filter: DeliveryFilter, upTo: unknown, stalledAfterMs: number): Promise<BulkResend> {
  if (!isId(upTo)) throw invalid('upTo must be the id of the newest Failed delivery counted, as the count answered it');
  return sql.begin(async (tx) => {
    const rows = await resendWhere(
      tx,
      tx`d.id in (
        select d.id from deliveries d
        join messages m on m.id = d.message_id
        join threads t on t.id = d.thread_id
        join agents a on a.id = d.recipient_id
        where d.step = 'failed' and d.id <= ${upTo} ${filterSql(tx, filter, stalledAfterMs)})`,
    );
    const outcome = bulkOutcome(rows);
    const chosen = Object.fromEntries(Object.entries(filter).filter(([, value]) => value !== null));
    if (outcome.resent > 0) {
      await recordDecision(tx, decider, {
        action: 'delivery.resend_failed',
        subjectType: 'delivery',
        subject: upTo,
        before: { failed: rows.length, filter: chosen },
        after: outcome,
      });
    }
    return outcome;
  });
}

function bulkOutcome(rows: { changed: boolean; unreachable: string | null }[]): BulkResend {
  const refused = new Map<string, number>();
  for (const row of rows) if (!row.changed && row.unreachable) refused.set(row.unreachable, (refused.get(row.unreachable) ?? 0) + 1);
  return {
    resent: rows.filter((r) => r.changed).length,
    refused: [...refused].map(([reason, count]) => ({ reason, count })),
  };
}

// Every Failed delivery to the agent whose last attempts were made since `since` (an endpoint's
// failing spell began then): the ones its failure held up, whenever they were accepted. Resent by
// the rule above, each resent or refused.
export async function resendFailedSince(sql: Queries, agentId: string, since: Date): Promise<BulkResend> {
  const rows = await resendWhere(sql, sql`d.step = 'failed' and d.recipient_id = ${agentId} and ${attemptedSince(sql, sql`${since}`)}`);
  return bulkOutcome(rows);
}

// Whether the delivery `d` had a doorbell attempt that ended at or after `since` (a time, or a
// column such as an endpoint's failing_since): how a failing spell is matched to the deliveries it
// held up, including the one whose failure began it (accepted before the spell did).
export const attemptedSince = (sql: Queries, since: ReturnType<Queries>) => sql`
  exists (select 1 from delivery_attempts x
          where x.delivery_id = d.id and x.attempted_at + x.duration_ms * interval '1 millisecond' >= ${since})`;

// A delivery younger than this is still in its first moments; its job is certainly queued.
export const REPUBLISH_MIN_AGE_MS = 60_000;

export type RepublishOptions = { publishAttempts: number; minAgeMs?: number };

// The sweep behind the re-publish cron: a delivery that still owes a doorbell but has no live job
// (none queued, none running; a job graphile-worker gave up on does not count) never reached the
// queue or fell out of it. It is published again, up to `publishAttempts` publishes in total (the
// original counts), and then Failed with the reason recorded.
export async function republishStranded(sql: Sql, { publishAttempts, minAgeMs = REPUBLISH_MIN_AGE_MS }: RepublishOptions) {
  const [row] = await sql<{ republished: number; failed: number }[]>`
    with stranded as (
      select d.id, d.publish_attempts
      from deliveries d
      join agents a on a.id = d.recipient_id
      where ${owesDoorbell(sql)}
        and d.created_at < now() - ${minAgeMs} * interval '1 millisecond'
        and not ${hasLiveNotifyJob(sql)}
      for update of d skip locked
    ), republished as (
      update deliveries d set publish_attempts = d.publish_attempts + 1, send_attempts = 0
      from stranded s where d.id = s.id and s.publish_attempts < ${publishAttempts}
      returning d.id, true as webhook
    ), job as (${addNotifyJobs(sql, 'republished')}
    ), failed as (
      update deliveries d set step = 'failed', failed_step = d.step,
        error = ${`The notification never reached the queue after ${publishAttempts} publish attempts.`}
      from stranded s where d.id = s.id and s.publish_attempts >= ${publishAttempts}
      returning d.id
    )
    select (select count(*)::int from republished) as republished, (select count(*)::int from failed) as failed,
           (select count(*)::int from job) as jobs`;
  return { republished: row!.republished, failed: row!.failed };
}
