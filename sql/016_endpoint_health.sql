-- Endpoint health: how each agent's webhook has been answering, kept as attempts are recorded so
-- that reading it never scans the attempt log, and the rule that switches off a webhook that has
-- failed for days (domain/agents/endpoint-health.ts).

-- A webhook switched off because it failed without a success for WEBHOOK_DISABLE_AFTER_MS: no
-- doorbell is owed while it is set (the agent polls, as an agent without a webhook does), until a
-- person enables it again or saves another address.
alter table agents
  add column webhook_disabled_at timestamptz,
  add column webhook_disabled_reason text,
  -- When the failing spell that switched it off began: switched back on, what failed since is
  -- resent on request (a test event answered meanwhile ends the spell, not this).
  add column webhook_failing_since timestamptz;

-- One row per agent whose current webhook has been tried; a webhook saved again or removed starts
-- without one (its figures are another endpoint's).
create table endpoint_health (
  agent_id uuid primary key references agents (id) on delete cascade,
  last_success_at timestamptz,
  last_failure_at timestamptz,
  last_failure_status integer,
  last_failure_error text,
  consecutive_failures integer not null default 0,
  -- The first failure since the last success: null while the endpoint answers.
  failing_since timestamptz,
  -- How many of WEBHOOK_WARN_AFTER_MS's stages people have been warned of in this failing spell.
  warned_stage smallint not null default 0,
  check ((failing_since is null) = (consecutive_failures = 0))
);
create index endpoint_health_failing_idx on endpoint_health (failing_since) where failing_since is not null;

-- Adds a batch's latency histogram to a window's, bucket by bucket.
create function add_counts(a integer[], b integer[]) returns integer[]
language sql immutable parallel safe as $$
  select array(select coalesce(x, 0) + coalesce(y, 0) from unnest(a, b) with ordinality as u(x, y, i) order by i)
$$;

-- Attempts per endpoint and five minutes: how many, how many answered 2xx, and how long they took
-- as counts per latency bucket (the bounds are ENDPOINT_LATENCY_BOUNDS_MS in endpoint-health.ts),
-- so that the last hour's and day's rate and percentiles are read from at most 288 rows.
create table endpoint_attempt_windows (
  agent_id uuid not null references agents (id) on delete cascade,
  window_start timestamptz not null,
  attempts integer not null,
  successes integer not null,
  latency_buckets integer[] not null,
  primary key (agent_id, window_start)
);

-- A test event a person sent to an agent's webhook from the dashboard, and what came of it.
create table endpoint_test_events (
  id uuid primary key default uuid_v7(),
  agent_id uuid not null references agents (id) on delete cascade,
  url text not null,
  -- The webhook it was asked for (notify-jobs.ts's webhookVersion): one saved again meanwhile is
  -- another endpoint, and the test event is not sent to it.
  webhook_version text not null,
  requested_by text not null,
  requested_at timestamptz not null default now(),
  attempted_at timestamptz,
  duration_ms integer,
  status integer,
  error text,
  response_body text,
  request_headers jsonb,
  response_headers jsonb
);
-- One test event on its way per agent at a time, whichever instance a person asks.
-- contract: the index is on a table this release creates; the previous one never writes it.
create unique index endpoint_test_events_one_pending_idx on endpoint_test_events (agent_id) where attempted_at is null;
create index endpoint_test_events_agent_idx on endpoint_test_events (agent_id, id);

-- What the attempt log keeps beside the status: where the doorbell went, and the handler's headers.
alter table delivery_attempts
  add column url text,
  add column response_headers jsonb;

-- Open Agents pages hear of a webhook switched off or on, and of a test event's outcome.
-- contract: the trigger is replaced by one that fires on one more column, which the previous
-- release never writes; for its writes it fires exactly as before.
drop trigger agents_listing_changed on agents;
-- contract: as above, the same trigger on one more column.
create trigger agents_listing_changed
  after insert or update of archived_at, webhook_url, webhook_disabled_at on agents
  for each row execute function notify_agent_listing();

create function notify_test_event() returns trigger
language plpgsql as $$
begin
  perform pg_notify('ams_dashboard', 'agent:' || new.agent_id::text);
  return null;
end
$$;

-- contract: on a table this release creates; the previous release never writes it.
create trigger endpoint_test_events_changed
  after insert or update of attempted_at on endpoint_test_events
  for each row execute function notify_test_event();
