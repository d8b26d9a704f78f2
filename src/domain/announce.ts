import type { Sql } from '../db/connect';
import { INBOX_CHANNEL } from '../db/inbox-signal';

// Changes to deliveries wake whoever listens: an agent's waiting inbox requests (channel
// ams_inbox, by recipient id) for a new delivery, and the open dashboards (ams_delivery, by
// delivery id) for any change. The busiest writers, a post and the webhook worker's attempt
// record, announce in a statement of their own once they have committed, not inside it: a
// transaction that notifies holds PostgreSQL's cluster-wide notify lock through its commit, which
// serialised every post and every attempt behind each other's WAL flush. (Other changes notify
// through a trigger; see sql/004.) The cost of the split: a process that dies between the two
// statements leaves a waiter to find the message when its wait ends, and a dashboard to show the
// change on its next one or on reload.
export const DELIVERY_CHANNEL = 'ams_delivery';

let reportFailure: (error: Error) => void = () => {};

// A wake-up that fails has no caller left to answer (the post already has); the process says
// where to report it.
export function onAnnounceFailed(report: (error: Error) => void) {
  reportFailure = report;
}

// Wake-ups inside a statement that queues doorbell jobs: add_jobs notifies the worker anyway, so
// the transaction holds the notify lock whatever else it sends, and wake-ups ride along for free.
// A SELECT over `source` (a CTE with `id`, `recipient_id` and `webhook`), empty unless a job is added.
export const wakeWithJobs = (sql: Sql, source: string) => sql`
  select pg_notify(${INBOX_CHANNEL}, s.recipient_id::text), pg_notify(${DELIVERY_CHANNEL}, s.id::text)
  from ${sql(source)} s where exists (select 1 from ${sql(source)} w where w.webhook)`;

type Pending = { recipientIds: string[]; deliveryIds: string[] };
type Queue = { next: Pending | null; sending: boolean };
const queues = new WeakMap<Sql, Queue>();

export const announceNewDeliveries = (sql: Sql, deliveryIds: string[], recipientIds: string[]) =>
  announce(sql, { deliveryIds, recipientIds });

export const announceDeliveryChanges = (sql: Sql, deliveryIds: string[]) => announce(sql, { deliveryIds, recipientIds: [] });

// One announcing statement in flight per pool: what commits meanwhile goes out together in the
// next one, so that under load many writers share one notify lock and one commit.
// Called after a commit, by code that may be retried on an error: it never throws.
function announce(sql: Sql, { deliveryIds, recipientIds }: Pending): void {
  if (deliveryIds.length === 0) return;
  try {
    let queue = queues.get(sql);
    if (!queue) queues.set(sql, (queue = { next: null, sending: false }));
    queue.next ??= { deliveryIds: [], recipientIds: [] };
    for (const id of deliveryIds) queue.next.deliveryIds.push(id);
    for (const id of recipientIds) queue.next.recipientIds.push(id);
    if (!queue.sending) send(sql, queue);
  } catch (error) {
    reportFailure(error as Error);
  }
}

function send(sql: Sql, queue: Queue) {
  const { deliveryIds, recipientIds } = queue.next!;
  queue.next = null;
  queue.sending = true;
  // Nothing here needs to survive a crash, so the commit need not wait for the WAL flush, and the
  // notify lock is held for a moment rather than through a disk write. Not inside a caller's own
  // transaction (a pool's sql has no savepoint), whose durability is not ours to change.
  const noFlush = 'savepoint' in sql ? sql`` : sql`set_config('synchronous_commit', 'off', true),`;
  sql`
    select ${noFlush}
           (select count(pg_notify(${INBOX_CHANNEL}, r::text)) from unnest(${recipientIds}::uuid[]) r)
         + (select count(pg_notify(${DELIVERY_CHANNEL}, d::text)) from unnest(${deliveryIds}::uuid[]) d) as sent`
    .then(
      () => {},
      (error: Error) => reportFailure(error),
    )
    .finally(() => {
      queue.sending = false;
      if (queue.next) send(sql, queue);
    });
}
