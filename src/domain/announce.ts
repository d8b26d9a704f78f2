import type { Queries, Sql } from '../db/connect';
import { DELIVERY_CHANNEL, INBOX_CHANNEL } from '../db/inbox-signal';
import type { Logger } from '../log';

// Changes to deliveries wake whoever listens: an agent's waiting inbox requests (channel
// ams_inbox, by recipient id) for a new delivery, and the open dashboards (ams_delivery, by
// delivery id) for any change. The busiest writers, a post and the webhook worker's attempt
// record, announce in a statement of their own once they have committed, not inside it: a
// transaction that notifies holds PostgreSQL's cluster-wide notify lock through its commit, which
// serialised every post and every attempt behind each other's WAL flush. (Other changes notify
// through a trigger; see sql/004.) The cost of the split: a process that dies between the two
// statements leaves a waiter to find the message when its wait ends, and a dashboard to show the
// change on its next one or on reload.
export { DELIVERY_CHANNEL };

// Wake-ups inside a statement that queues doorbell jobs: add_jobs notifies the worker anyway, so
// the transaction holds the notify lock whatever else it sends, and wake-ups ride along for free.
// A SELECT over `source` (a CTE with `id`, `recipient_id` and `webhook`), empty unless a job is added.
export const wakeWithJobs = (sql: Queries, source: string) => sql`
  select pg_notify(${INBOX_CHANNEL}, s.recipient_id::text), pg_notify(${DELIVERY_CHANNEL}, s.id::text)
  from ${sql(source)} s where exists (select 1 from ${sql(source)} w where w.webhook)`;

// A wake-up that fails has no caller left to answer (the post already has): it is reported to the
// log of every caller whose wake-ups the failed statement carried.
type Pending = { recipientIds: string[]; deliveryIds: string[]; logs: Set<Logger> };
type Queue = { next: Pending | null; sending: boolean };
const queues = new WeakMap<Sql, Queue>();

export const announceNewDeliveries = (sql: Sql, log: Logger, deliveryIds: string[], recipientIds: string[]) =>
  announce(sql, log, deliveryIds, recipientIds);

export const announceDeliveryChanges = (sql: Sql, log: Logger, deliveryIds: string[]) => announce(sql, log, deliveryIds, []);

// One announcing statement in flight per pool: what commits meanwhile goes out together in the
// next one, so that under load many writers share one notify lock and one commit. Callers whose
// writes shared a statement (db/batcher.ts) announce one after another in the same turn, so the
// statement waits for the turn to end and carries all of them.
// Called after a commit, whose caller has its answer already: it never throws.
function announce(sql: Sql, log: Logger, deliveryIds: string[], recipientIds: string[]): void {
  if (deliveryIds.length === 0) return;
  let queue = queues.get(sql);
  if (!queue) queues.set(sql, (queue = { next: null, sending: false }));
  queue.next ??= { deliveryIds: [], recipientIds: [], logs: new Set() };
  for (const id of deliveryIds) queue.next.deliveryIds.push(id);
  for (const id of recipientIds) queue.next.recipientIds.push(id);
  queue.next.logs.add(log);
  if (!queue.sending) {
    queue.sending = true;
    queueMicrotask(() => send(sql, queue));
  }
}

function send(sql: Sql, queue: Queue) {
  const { deliveryIds, recipientIds, logs } = queue.next!;
  queue.next = null;
  // Nothing here needs to survive a crash, so the commit need not wait for the WAL flush, and the
  // notify lock is held for a moment rather than through a disk write. Not inside a caller's own
  // transaction (a pool's sql has no savepoint), whose durability is not ours to change.
  const statement = async () => {
    const noFlush = 'savepoint' in sql ? sql`` : sql`set_config('synchronous_commit', 'off', true),`;
    await sql`
      select ${noFlush}
             (select count(pg_notify(${INBOX_CHANNEL}, r::text)) from unnest(${recipientIds}::uuid[]) r)
           + (select count(pg_notify(${DELIVERY_CHANNEL}, d::text)) from unnest(${deliveryIds}::uuid[]) d) as sent`;
  };
  statement()
    .catch((error: Error) => {
      for (const log of logs) log.warn('announce_failed', { error: error.message });
    })
    .finally(() => {
      if (queue.next) send(sql, queue);
      else queue.sending = false;
    });
}
