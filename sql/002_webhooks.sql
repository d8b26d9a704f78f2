-- Liveness of worker processes. graphile-worker leaves the jobs of a worker that died without
-- releasing them locked for four hours; each of our worker pools beats here every few seconds,
-- so a live pool can hand a dead pool's jobs back to the queue within seconds.
create table worker_heartbeats (
  -- graphile-worker's pool id: the value it writes into jobs.locked_by.
  worker_id text primary key,
  started_at timestamptz not null default now(),
  beat_at timestamptz not null default now()
);
