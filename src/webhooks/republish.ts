import type { Task } from 'graphile-worker';
import type { Sql } from '../db/connect';
import { addNotifyJobs, notifyJobKey } from '../domain/notify-jobs';
import type { Logger } from '../log';
import { owesDoorbell } from './owed';

export const REPUBLISH_TASK = 'republish';
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
      join threads t on t.id = d.thread_id
      where ${owesDoorbell(sql)}
        and d.created_at < now() - ${minAgeMs} * interval '1 millisecond'
        and not exists (
          select 1 from graphile_worker.jobs j
          where j.key = ${notifyJobKey('')} || d.id and (j.locked_at is not null or j.attempts < j.max_attempts)
        )
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

export const republishTask =
  (sql: Sql, log: Logger, options: RepublishOptions): Task =>
  async () => {
    const result = await republishStranded(sql, options);
    if (result.republished || result.failed) log.warn('doorbells_republished', result);
  };
