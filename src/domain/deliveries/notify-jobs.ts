import type { JSONValue } from 'postgres';
import type { Queries, Sql } from '../../db/connect';
import { addJobs, liveJob, overdueJob, makeDueWhere, payloadValuesWhere, queuedJobWith, retiredFirst, retireJobs } from '../../db/job-queue';

// Doorbells are graphile-worker jobs added by SQL inside the transaction that owes them.
// graphile-worker's own retries only cover a crashed worker; the contract's retry schedule is
// kept by adding the next attempt as a new job (see webhooks/notify). The job key names the
// delivery, so "does this delivery have a live job?" is one indexed lookup.
export const NOTIFY_TASK = 'notify';
export const NOTIFY_JOB_MAX_ATTEMPTS = 5;
export const notifyJobKey = (deliveryId: string) => `notify:${deliveryId}`;

// The payload's mark of a job its post's process was to ring (doorbells-at-once.ts): the queue's
// first run of a marked job counts as a second, since the ring may have gone out before any
// attempt was counted on the job (webhooks/notify-task.ts). A job handed to the queue unrung loses it.
export const AT_ONCE_MARK = 'atOnce';

// A SELECT that queues one job per row of `source` (a CTE or table with `id` and `webhook`
// columns) whose webhook is true: due at once, or each row's `delayColumn` milliseconds from now by
// the database's clock (the one the queue goes by; a null delay is due at once). With `doorbell`,
// the source's `doorbell` column rides in the payload: the notification as it stood when the job
// was added, so that the worker can ring at once (see webhooks/notify-task). With
// `ringWindowColumn`, a post's: each row's window for its own process's ringer (a null window: due
// at once), and `atOnce` in the payload where it has one (doorbells-at-once.ts). With no such row,
// add_jobs is not called at all: it
// would still NOTIFY every worker, and a notifying transaction holds PostgreSQL's cluster-wide
// notify lock through its commit.
export function addNotifyJobs(sql: Queries, source: string, { delayColumn = '', doorbell = false, ringWindowColumn = '' } = {}) {
  const delay = ringWindowColumn || delayColumn;
  const fields = doorbell ? sql`jsonb_build_object('deliveryId', s.id, 'doorbell', s.doorbell)` : sql`jsonb_build_object('deliveryId', s.id)`;
  const atOnce = ringWindowColumn
    ? sql` || case when ${sql('s.' + ringWindowColumn)} is not null then jsonb_build_object(${AT_ONCE_MARK}::text, true) else '{}'::jsonb end`
    : sql``;
  const spec = {
    task: NOTIFY_TASK,
    payload: sql`(${fields}${atOnce})::json`,
    runAt: delay ? sql`now() + ${sql('s.' + delay)} * interval '1 millisecond'` : sql`null::timestamptz`,
    maxAttempts: NOTIFY_JOB_MAX_ATTEMPTS,
    key: sql`${notifyJobKey('')} || s.id`,
  };
  return sql`
    ${addJobs(sql, sql`${sql(source)} s where s.webhook`, spec)}
    where exists (select 1 from ${sql(source)} s where s.webhook)`;
}

// Whether the delivery `d` has a queued or running doorbell job.
export const hasLiveNotifyJob = (sql: Sql) => liveJob(sql, sql`${notifyJobKey('')} || d.id`);

// Whether the delivery `d`'s doorbell is parked: due, or overdue, but waiting for a free slot at its
// endpoint (webhooks/endpoint-slots.ts) rather than for a time.
export const hasParkedNotifyJob = (sql: Queries) => queuedJobWith(sql, sql`${notifyJobKey('')} || d.id`, { parked: true });

// Whether the delivery `d` has a doorbell job that fell due more than `ms` ago and no worker took.
export const hasOverdueNotifyJob = (sql: Sql, ms: number) => overdueJob(sql, sql`${notifyJobKey('')} || d.id`, ms);

// Identifies the webhook a doorbell was prepared for: a webhook saved again (new secret) or
// removed and added is another version. Microseconds since the epoch, as text.
export const webhookVersion = (sql: Queries, agent: string) =>
  sql`(extract(epoch from ${sql(agent)}.webhook_set_at) * 1000000)::bigint::text`;

// Puts a doorbell job back in the queue, due `delayMs` from now, under the delivery's key and
// marked as parked for `endpoint`. The running job (`job`, when a worker parks it) is retired first
// in the same statement, so that the key is free for the new one and a lost completion cannot run
// the old one again.
export async function parkNotifyJob(
  sql: Sql,
  payload: { deliveryId: string; doorbell?: JSONValue },
  endpoint: string,
  delayMs: number,
  job?: string,
): Promise<void> {
  await sql`
    with retired as (${retireJobs(sql, job ? [job] : [])})
    select graphile_worker.add_job(${NOTIFY_TASK}, ${sql.json({ ...payload, parked: true, endpoint })}::json,
      run_at => now() + ${delayMs} * interval '1 millisecond', max_attempts => ${NOTIFY_JOB_MAX_ATTEMPTS},
      job_key => ${notifyJobKey(payload.deliveryId)})
    where ${retiredFirst(sql)}`;
}

// Makes due now up to `count` doorbells parked for `endpoint` (by any process), the oldest first.
export const wakeParkedNotifyJobs = (sql: Sql, endpoint: string, count: number) =>
  makeDueWhere(sql, NOTIFY_TASK, { parked: true, endpoint }, count);

// The endpoints that have doorbells parked for them, by any process.
export const parkedNotifyEndpoints = (sql: Sql) => payloadValuesWhere(sql, NOTIFY_TASK, { parked: true }, 'endpoint');
