import type { Sql } from '../db/connect';
import type { Logger } from '../log';

export type HeartbeatOptions = {
  intervalMs: number;
  staleMs: number;
  // Called after jobs of dead pools were put back, so this pool can take them without waiting to poll.
  onReleased: () => void;
  // Ids of the jobs this pool is running right now.
  running: () => string[];
};

// Jobs locked by a worker pool that stopped beating (killed, frozen, cut off) go back to the
// queue. A pool that never beat at all is judged by how long its jobs have been locked instead.
// Returns the pool ids that were released.
export async function releaseDeadWorkers(sql: Sql, staleMs: number): Promise<string[]> {
  const stale = sql`now() - ${staleMs} * interval '1 millisecond'`;
  return sql.begin(async (tx) => {
    const dead = (
      await tx<{ id: string }[]>`
        select distinct j.locked_by as id
        from graphile_worker.jobs j
        left join worker_heartbeats h on h.worker_id = j.locked_by
        where j.locked_by is not null
          and (h.beat_at < ${stale} or (h.worker_id is null and j.locked_at < ${stale}))`
    ).map((r) => r.id);
    if (dead.length > 0) await tx`select graphile_worker.force_unlock_workers(${dead}::text[])`;
    await tx`delete from worker_heartbeats where beat_at < ${stale}`;
    return dead;
  });
}

// Jobs still locked by this live pool that it is no longer running: graphile-worker does not await
// the query that completes or fails a finished job, and when that query is lost (the database went
// away at that moment) the job would stay locked by us for graphile-worker's 4 hours.
export async function releaseLostJobs(sql: Sql, workerId: string, running: string[], staleMs: number): Promise<number> {
  const released = await sql`
    update graphile_worker._private_jobs set locked_by = null, locked_at = null
    where locked_by = ${workerId} and locked_at < now() - ${staleMs} * interval '1 millisecond'
      and not (id = any(${running}::bigint[]))`;
  return released.count;
}

// Beats for one pool and, on the same timer, releases the jobs of dead ones. Every live pool does
// both, so recovery needs no leader: whoever looks first releases, the rest find nothing.
export function startHeartbeat(sql: Sql, workerId: string, options: HeartbeatOptions, log: Logger) {
  const tick = async () => {
    try {
      await sql`
        insert into worker_heartbeats (worker_id) values (${workerId})
        on conflict (worker_id) do update set beat_at = now()`;
      const released = await releaseDeadWorkers(sql, options.staleMs);
      if (released.length > 0) log.warn('dead_workers_released', { workerIds: released });
      const lost = await releaseLostJobs(sql, workerId, options.running(), options.staleMs);
      if (lost > 0) log.warn('lost_jobs_released', { workerId, jobs: lost });
      if (released.length > 0 || lost > 0) options.onReleased();
    } catch (error) {
      log.error('heartbeat_failed', { workerId, message: (error as Error).message });
    }
  };
  let running = tick();
  const timer = setInterval(() => {
    running = running.then(tick);
  }, options.intervalMs);
  return {
    ready: running,
    // A pool that shut down cleanly has released its jobs; its row goes with it.
    stop: async () => {
      clearInterval(timer);
      await running;
      await sql`delete from worker_heartbeats where worker_id = ${workerId}`;
    },
  };
}
