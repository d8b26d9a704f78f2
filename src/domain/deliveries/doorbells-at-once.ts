import type { JSONValue } from 'postgres';
import type { Sql } from '../../db/connect';
import { makeJobsDue } from '../../db/job-queue';
import type { Logger } from '../../log';
import type { AttemptNumbers } from './delivery-steps';
import { AT_ONCE_MARK } from './notify-jobs';

// A post's doorbell is rung at once by the process that wrote it, when that process runs a worker
// (webhooks/ring-at-once.ts): picked up from the queue, it would wait for the commit's NOTIFY to
// reach a worker, for that worker's fetch and for the look-up of whether it is still owed, which
// at 200 posts a second made a doorbell three times a bare job's pick-up. The job is still added by
// the post's statement, due only after this window: should the process die before the doorbell is
// recorded, the queue rings it when the window ends, a few seconds late and nothing lost. A ring
// still on the wire after a moment claims the job, as a worker takes one, so that the window's end
// cannot hand it to the queue as well (ring-at-once.ts).
export const RING_AT_ONCE_WINDOW_MS = 3_000;

// A doorbell job just committed: its id, its payload as the post wrote it, and the attempt it is,
// owed as of that commit.
export type CommittedDoorbell = { id: string; payload: { deliveryId: string; doorbell?: JSONValue }; owed: AttemptNumbers };
export type RingAtOnce = (jobs: CommittedDoorbell[]) => void;

// One ringer per connection pool: the worker in this process, while it runs.
const ringers = new WeakMap<Sql, RingAtOnce>();

// Makes `ring` the ringer of posts written through `sql`; the answer takes it away again.
export function ringHere(sql: Sql, ring: RingAtOnce): () => void {
  ringers.set(sql, ring);
  return () => {
    if (ringers.get(sql) === ring) ringers.delete(sql);
  };
}

// Makes jobs that were to be rung at once due now, for the queue, as never rung.
export const handToTheQueue = (sql: Sql, ids: string[]) => makeJobsDue(sql, ids, AT_ONCE_MARK);

// How long the doorbell jobs of a post written through `sql` wait for its ringer: null (due at
// once) when this process has none.
export const ringWindowFor = (sql: Sql) => (ringers.has(sql) ? RING_AT_ONCE_WINDOW_MS : null);

// Hands a committed post's doorbell jobs to the ringer. A ringer gone since the post was written
// (the worker stopping) hands them to the queue instead, or, should that fail, leaves them to it
// when the window ends.
export function ringAfterCommit(sql: Sql, log: Logger, jobs: CommittedDoorbell[]): void {
  if (jobs.length === 0) return;
  const ring = ringers.get(sql);
  if (ring) return ring(jobs);
  handToTheQueue(sql, jobs.map((job) => job.id)).catch((error: Error) =>
    log.warn('doorbell_hand_over_failed', { jobs: jobs.length, error: error.message }),
  );
}
