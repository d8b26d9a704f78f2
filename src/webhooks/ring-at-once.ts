import { batchedStatement } from '../db/batcher';
import type { Sql } from '../db/connect';
import { claimJobs, failClaimedJob } from '../db/job-queue';
import { handToTheQueue, type CommittedDoorbell } from '../domain/deliveries/doorbells-at-once';
import type { Logger } from '../log';
import type { EndpointSlots } from './endpoint-slots';
import { cutOnTheWire, type Notifier, type NotifyPayload } from './notify-task';
import { settlesWithin } from '../settles-within';

export type RingAtOnceDeps = {
  sql: Sql;
  // The worker pool whose jobs these become once claimed: its heartbeat vouches for them, and
  // should it die, any live pool puts them back in the queue (heartbeat.ts).
  workerId: string;
  log: Logger;
  run: Notifier['run'];
  // Doorbells in flight in this process at most, rung at once or run by the queue's workers
  // (`queueHolds`: the jobs those hold); beyond it, a post's doorbells are made due for the queue.
  cap: number;
  queueHolds: () => number;
  // The worker's slots per endpoint: a doorbell whose endpoint has none free now is the queue's.
  slots: EndpointSlots;
};

export type Ringer = {
  ring: (jobs: CommittedDoorbell[]) => void;
  // Ids of the jobs it has claimed, for the heartbeat's count of what this pool runs.
  held: () => string[];
  // Takes no more; claims what is in flight, waits up to `graceMs` for it, then cuts what is still
  // on the wire, whose jobs go back to the queue.
  stop: (graceMs: number) => Promise<void>;
};

// A ring still in flight this long after it started claims its job: well inside the window
// (domain/deliveries/doorbells-at-once.ts), and long enough that almost every doorbell is answered
// and recorded first, at no cost.
export const CLAIM_AFTER_MS = 250;
const CLAIM_SWEEP_MS = 100;

// `settling`: its run failed and its job is being given back; no claim may take it meanwhile.
type InFlight = { job: CommittedDoorbell; startedAt: number; claimed: boolean; settling: boolean };

// Jobs handed to the queue together share a statement.
const handOver = batchedStatement(async (sql: Sql, ids: string[]) => {
  await handToTheQueue(sql, ids);
  return ids.map(() => undefined);
});

// How long a stop waits, after cutting what was on the wire, for the runs to end (a run held up
// in a database statement), before it gives up on them.
const STOP_AFTER_CUT_MS = 10_000;

// Rings the doorbells of posts this process committed, straight after the commit, as the queue's
// worker runs a doorbell job (notify-task.ts) and with the same rules, but without waiting for a
// worker to hear of the job and fetch it, nor asking again whether a doorbell owed a moment ago is
// still owed. The statement that records the attempt retires the job, as it does a worker's. A ring
// still in flight after CLAIM_AFTER_MS claims its job (one statement for all such), so that the
// queue's workers do not take it when its window ends and a dead process's claimed jobs are given
// back by the heartbeat; one that never got that far is the queue's when the window ends. A claim
// that fails (the database away) leaves the ring to race the window's end: `doorbell_claim_lost`.
export function ringAtOnce(deps: RingAtOnceDeps): Ringer {
  const inFlight = new Map<string, InFlight>();
  const runs = new Set<Promise<void>>();
  const cut = new AbortController();
  let stopped = false;

  // A doorbell is rung here only while this process has room for it at once: fewer doorbells in
  // flight than its cap, the queue's included, and a slot free at its endpoint. The rest go to the
  // queue straight away, due now, as they would have been without a ringer. Under a burst the queue
  // is the faster way (it fetches and completes in batches), and doorbells rung here beside its
  // workers took the endpoints' slots from them: they waited, were parked and woken a few at a time,
  // and a kill in the middle of a burst left its doorbells unrung for 5–12 s instead of 4
  // (test-faults/crash.test.ts).
  const ring = (jobs: CommittedDoorbell[]) => {
    if (stopped) return jobs.forEach(toTheQueue);
    // Slots are taken as the runs start, a moment later: those promised here count already.
    const promised = new Map<string, number>();
    for (const job of jobs) {
      const url = (job.payload as NotifyPayload).doorbell?.url;
      const slotFree = url !== undefined && deps.slots.free(url) > (promised.get(url) ?? 0);
      if (slotFree && inFlight.size + deps.queueHolds() < deps.cap) {
        promised.set(url, (promised.get(url) ?? 0) + 1);
        start(job);
      } else toTheQueue(job);
    }
  };

  // Announced on the queue's channel as they are made due (db/job-queue.ts), so that whichever
  // worker pool is free takes them.
  const toTheQueue = (job: CommittedDoorbell) =>
    void handOver(deps.sql, job.id).catch((error: Error) =>
      deps.log.warn('doorbell_hand_over_failed', { deliveryId: job.payload.deliveryId, error: error.message }),
    );

  const start = (job: CommittedDoorbell) => {
    const entry: InFlight = { job, startedAt: performance.now(), claimed: false, settling: false };
    inFlight.set(job.id, entry);
    // Not taken from the queue: no attempt is counted on the job until it is claimed.
    const run = deps
      .run(job.payload as NotifyPayload, { id: job.id, attempts: 0, last_error: null }, cut.signal, job.owed)
      .catch((error: Error) => giveBack(entry, error))
      .finally(() => {
        inFlight.delete(job.id);
        runs.delete(run);
      });
    runs.add(run);
  };

  // A run that failed as the queue's task would have (the database away for longer than a run
  // waits, a shutdown mid-send) leaves its job to the queue. One it claimed is given back as
  // graphile-worker fails a job, to run again after the back-off (should that fail too, the
  // heartbeat gives it back, as it does a lost completion). One it had not claimed is handed over
  // as never rung, unless it was cut on the wire: that one keeps its mark, and the queue's run of
  // it records the attempt that may have reached the handler (or it falls due when its window
  // ends, should the hand-over fail).
  const giveBack = async (entry: InFlight, error: Error) => {
    entry.settling = true;
    const { deliveryId } = entry.job.payload;
    deps.log.warn('doorbell_run_failed', { deliveryId, pickedUp: 'at once', error: error.message });
    await claiming;
    try {
      if (entry.claimed) await failClaimedJob(deps.sql, deps.workerId, entry.job.id, error.message);
      else if (!cutOnTheWire(error)) await handOver(deps.sql, entry.job.id);
    } catch (failed) {
      deps.log.warn('doorbell_give_back_failed', { deliveryId, error: (failed as Error).message });
    }
  };

  // Claims the jobs of rings in flight for at least `olderThanMs`; one claim at a time, and none
  // queued behind it by the sweep.
  let claiming: Promise<void> = Promise.resolve();
  let claimBusy = false;
  const claimSlow = (olderThanMs: number) => {
    claiming = claiming.then(async () => {
      const since = performance.now() - olderThanMs;
      const slow = [...inFlight.values()].filter((entry) => !entry.claimed && !entry.settling && entry.startedAt <= since);
      if (slow.length === 0) return;
      try {
        const { taken, notTaken } = await claimJobs(deps.sql, deps.workerId, slow.map((entry) => entry.job.id));
        const ids = new Set(taken);
        for (const entry of slow) if (ids.has(entry.job.id)) entry.claimed = true;
        // A worker took the job first (its window ended): the doorbell may be rung twice.
        const lost = slow.filter((entry) => notTaken.includes(entry.job.id));
        if (lost.length > 0) deps.log.warn('doorbell_claim_lost', { deliveryIds: lost.map((entry) => entry.job.payload.deliveryId) });
      } catch (error) {
        deps.log.warn('doorbell_claim_failed', { jobs: slow.length, error: (error as Error).message });
      }
    });
    return claiming;
  };
  const sweep = setInterval(() => {
    if (claimBusy) return;
    claimBusy = true;
    void claimSlow(CLAIM_AFTER_MS).finally(() => (claimBusy = false));
  }, CLAIM_SWEEP_MS);

  const stop = async (graceMs: number) => {
    stopped = true;
    clearInterval(sweep);
    await claimSlow(0);
    await settlesWithin(Promise.allSettled(runs), graceMs);
    cut.abort();
    if (!(await settlesWithin(Promise.allSettled(runs), STOP_AFTER_CUT_MS))) {
      deps.log.warn('doorbell_ringer_stop_incomplete', { running: runs.size, waitedMs: STOP_AFTER_CUT_MS });
    }
  };

  const held = () => [...inFlight.values()].filter((entry) => entry.claimed).map((entry) => entry.job.id);
  return { ring, held, stop };
}
