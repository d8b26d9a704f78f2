import type { Sql } from '../db/connect';
import { releaseDeadWorkers, releaseLostJobs } from '../db/job-queue';
import { isDatabaseUnavailable } from '../db/unavailable';
import type { Logger } from '../log';

export type HeartbeatOptions = {
  intervalMs: number;
  staleMs: number;
  // Called after jobs of dead pools (how many pools) or this pool's lost jobs were put back, so
  // this pool can take them without waiting to poll.
  onReleased: (deadWorkers: number) => void;
  // Ids of the jobs this pool holds: running, finished but maybe not yet completed, or fetched.
  running: () => string[];
  // Of those, the ones fetched for the local queue and not started.
  queued: () => string[];
  // Our task names: only their jobs are ever released.
  tasks: string[];
};

// Beats for one pool and, on the same timer, releases the jobs of dead ones. Every live pool does
// both, so recovery needs no leader: whoever looks first releases, the rest find nothing.
export function startHeartbeat(sql: Sql, workerId: string, options: HeartbeatOptions, log: Logger) {
  const startedAt = performance.now();
  let beatAt: number | undefined;
  const tick = async () => {
    try {
      const queued = options.queued();
      await sql`
        insert into worker_heartbeats (worker_id, queued) values (${workerId}, ${queued}::bigint[])
        on conflict (worker_id) do update set beat_at = now(), queued = excluded.queued`;
      beatAt = performance.now();
      const released = await releaseDeadWorkers(sql, options.tasks, options.staleMs);
      if (released.length > 0) log.warn('dead_workers_released', { workerIds: released });
      const lost = await releaseLostJobs(sql, workerId, options.running(), options.staleMs);
      if (lost > 0) log.warn('lost_jobs_released', { workerId, jobs: lost });
      if (released.length > 0 || lost > 0) options.onReleased(released.length);
    } catch (error) {
      // A beat missed while the database is away is the outage, logged as such by every part; the
      // next beat that gets through releases what the outage left behind.
      log[isDatabaseUnavailable(error) ? 'warn' : 'error']('heartbeat_failed', { workerId, message: (error as Error).message });
    }
  };
  let running = tick();
  const timer = setInterval(() => {
    running = running.then(tick);
  }, options.intervalMs);
  return {
    ready: running,
    // For this process's health check: how long since a beat last reached the database (since the
    // start, before the first one did).
    silentForMs: () => performance.now() - (beatAt ?? startedAt),
    // A pool that shut down cleanly has released its jobs; its row goes with it.
    stop: async () => {
      clearInterval(timer);
      await running;
      await sql`delete from worker_heartbeats where worker_id = ${workerId}`;
    },
  };
}
