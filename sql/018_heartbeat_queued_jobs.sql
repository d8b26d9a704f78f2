-- The jobs a worker pool has fetched for its local queue but not started (graphile-worker counts an
-- attempt when it fetches a job, not when it runs it). Written with every beat, so that whoever
-- releases the jobs of a pool that died gives those back with the attempt uncounted: a doorbell
-- that never left is not logged as an attempt cut off. The previous release leaves it empty.
alter table worker_heartbeats add column queued bigint[] not null default '{}';
