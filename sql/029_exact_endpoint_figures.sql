-- Endpoint figures a person can trust (domain/agents/endpoint-health.ts): true percentiles over an
-- endpoint's most recent attempts instead of ones interpolated inside latency buckets, exact mean
-- and max per five-minute window, and what a warning and a failure were, so that the dashboard
-- says when people were warned and what the handler answered without opening the attempt log.

-- The durations of the endpoint's most recent attempts (at most RECENT_ATTEMPTS, oldest first) and
-- when each began: kept on the health row by the statement that records the attempts, so that
-- reading them stays a primary-key lookup. The previous release leaves them as they are: the
-- attempts it records are missing from them, never wrongly in them.
alter table endpoint_health
  add column recent_ms integer[] not null default '{}',
  add column recent_at timestamptz[] not null default '{}',
  -- When the sweep raised warned_stage to its present value; null at stage 0.
  add column warned_at timestamptz,
  -- The first bytes of the handler's answer to the last failed attempt: its own reason.
  add column last_failure_body text;

-- Exact figures per window, beside the histogram: how many attempts were timed here and the sum
-- and maximum of their durations. Attempts the previous release records add to `attempts` and
-- the histogram but not to `timed`, so that the mean (sum_ms / timed) stays exact for what it counts.
alter table endpoint_attempt_windows
  add column timed integer not null default 0,
  add column sum_ms bigint not null default 0,
  add column max_ms integer;
