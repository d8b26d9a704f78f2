import type { Queries, Sql } from '../../db/connect';
import { DELIVERY_CHANNEL, INBOX_CHANNEL } from '../../db/inbox-signal';
import type { Logger } from '../../log';

// The wake-up contract: who hears of a change to a delivery, and which write sends it. Every
// write that changes what a watcher sees wakes it exactly once, by exactly one of three ways, and
// test/delivery-wake-ups.test.ts holds each write path of src/domain to that. (A re-publish that
// queues a lost doorbell again changes nothing a watcher sees, and wakes nobody.)
//
// Who listens:
// - ams_inbox, payload the recipient's id: an agent's waiting inbox request, for a new delivery.
// - ams_delivery, payload the delivery's id: open dashboards and senders waiting on receipts, for
//   any change they could see (a new delivery, its step, an attempt, a retry queued or dropped,
//   a report, a read, an acknowledgement).
//
// Who sends:
// 1. The trigger deliveries_changed (sql/010_attempt_log.sql), inside the writer's transaction, for
//    an update of a watched column (step, failed_step, error, notified_at, delivered_at,
//    fetched_at, acknowledged_at, next_attempt_at), whoever makes it: reports, reads, resends,
//    re-publishes that fail, a retry dropped. Nothing to call.
// 2. After the commit, in a statement of its own, for writers the trigger leaves alone: a post
//    (wakeForNewDeliveries; the trigger fires on updates only) and an interrupted attempt's record
//    (wakeAfterAttempts; it raises send_attempts, which silences the trigger). A transaction that
//    notifies holds PostgreSQL's cluster-wide notify lock through its commit, which serialised
//    every post behind each other's WAL flush. The cost: a process that dies between the two
//    statements leaves a waiter to find the message when its wait ends, and a dashboard to show
//    the change on its next one or on reload.
// 3. Inside the writer's own statement: a post that queues a doorbell job (wakeWithJobs; add_jobs
//    notifies the worker anyway, so the lock is taken whatever else is sent, and the wake-ups ride
//    along for free; the post then skips way 2), and the record of doorbell attempts
//    (delivery-steps.ts): a process sends those one statement at a time, so holding the lock
//    through their commit queues none of its own attempts behind another (it still shares the lock
//    with every other notifying commit: posts, other processes), and a statement of its own per
//    batch cost the worker more than the lock (docs/internals/performance-history.md, "Fewer statements per
//    doorbell"). A wake-up refused here (PostgreSQL's notification queue full) refuses the write
//    with it: a post that queues a doorbell fails, an attempt goes unrecorded and its doorbell is
//    rung again.
//
// A new write to deliveries either changes a watched column without raising send_attempts (way 1),
// or calls one of the functions below or notifies in its own statement (ways 2 and 3); never both,
// never neither.
export { DELIVERY_CHANNEL };

// Way 3: a SELECT over `source` (a CTE with `id`, `recipient_id` and `webhook`) that wakes
// the recipients and the deliveries' watchers, empty unless a job is added.
export const wakeWithJobs = (sql: Queries, source: string) => sql`
  select pg_notify(${INBOX_CHANNEL}, s.recipient_id::text), pg_notify(${DELIVERY_CHANNEL}, s.id::text)
  from ${sql(source)} s where exists (select 1 from ${sql(source)} w where w.webhook)`;

// A wake-up that fails has no caller left to answer (the post already has): it is reported to the
// log of every caller whose wake-ups the failed statement carried.
type Pending = { recipientIds: string[]; deliveryIds: string[]; logs: Set<Logger> };
type Queue = { next: Pending | null; sending: boolean };
const queues = new WeakMap<Sql, Queue>();

// Way 2, for a post whose statement queued no doorbell job: its recipients and watchers.
export const wakeForNewDeliveries = (sql: Sql, log: Logger, deliveryIds: string[], recipientIds: string[]) =>
  announce(sql, log, deliveryIds, recipientIds);

// Way 2, for an interrupted attempt's record: its delivery's watchers.
export const wakeAfterAttempts = (sql: Sql, log: Logger, deliveryIds: string[]) => announce(sql, log, deliveryIds, []);

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
