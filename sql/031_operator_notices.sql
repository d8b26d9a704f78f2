-- Operator webhooks (domain/people/operator-webhooks.ts): people are told where they already look
-- (a Slack channel, an incident tool) when an agent's webhook is warned about, switched off or
-- answers again, when messages wait for their approval and when the loop breaker pauses a thread.
-- Each notice is queued in the transaction of the event it tells of, and sent, signed and retried
-- by the worker (webhooks/operator-notice-task.ts); every attempt is kept.

-- Where notices go: added on the dashboard, or the one set by OPERATOR_WEBHOOK_URL (written at
-- each start from the environment, removed when the variable is).
create table operator_webhooks (
  id uuid primary key default uuid_v7(),
  url text not null,
  format text not null check (format in ('slack', 'json')),
  -- A Standard Webhooks secret (`whsec_…`): every notice is signed with it.
  secret text not null,
  source text not null check (source in ('dashboard', 'environment')),
  added_by text not null,
  added_at timestamptz not null default now(),
  -- Its own health, kept as attempts are recorded.
  last_success_at timestamptz,
  last_failure_at timestamptz,
  last_failure text,
  -- The first failed attempt since the last success: null while it answers.
  failing_since timestamptz
);
-- One webhook set by the environment at most.
-- contract: a new table, which the previous release never writes.
create unique index operator_webhooks_environment_idx on operator_webhooks (source) where source = 'environment';

-- One notice for one webhook: what it tells (`notice`, rendered as the webhook's format asks when it
-- is sent), and how it went.
create table operator_notices (
  id uuid primary key default uuid_v7(),
  webhook_id uuid not null references operator_webhooks (id) on delete cascade,
  event text not null,
  notice jsonb not null,
  created_at timestamptz not null default now(),
  attempts smallint not null default 0,
  delivered_at timestamptz,
  gave_up_at timestamptz
);
create index operator_notices_webhook_idx on operator_notices (webhook_id, id);
create index operator_notices_created_idx on operator_notices (created_at);

-- Every attempt at a notice and what the receiver answered (its first KiB).
create table operator_notice_attempts (
  id bigint generated always as identity primary key,
  notice_id uuid not null references operator_notices (id) on delete cascade,
  webhook_id uuid not null references operator_webhooks (id) on delete cascade,
  attempt smallint not null,
  attempted_at timestamptz not null,
  duration_ms integer not null,
  status integer,
  error text,
  response_body text
);
create index operator_notice_attempts_webhook_idx on operator_notice_attempts (webhook_id, id);
create index operator_notice_attempts_notice_idx on operator_notice_attempts (notice_id, id);

-- The worker's jobs for attempts at notices (webhooks/operator-notice-task.ts, the task
-- OPERATOR_NOTICE_TASK): `attempt` of each, due at `run_at` (null: at once). A job's own attempts
-- only cover a run cut off before it recorded its attempt; a failed attempt queues the next here.
create function operator_notice_jobs(notices uuid[], attempt integer, run_at timestamptz default null) returns void language plpgsql as $$
begin
  if coalesce(array_length(notices, 1), 0) = 0 then return; end if;
  perform graphile_worker.add_jobs(array(
    select json_populate_record(null::graphile_worker.job_spec, json_build_object(
      'identifier', 'operator_notice', 'payload', json_build_object('noticeId', n, 'attempt', attempt), 'run_at', run_at,
      'max_attempts', 5, 'job_key', 'operator_notice:' || n || ':' || attempt))
    from unnest(notices) n));
end $$;

-- Queues a notice (`notice`, whose `event` it is) for every operator webhook, or only `only_webhook`,
-- in the caller's transaction, so that it goes out exactly when the event it tells of commits. One
-- call per event: a statement that makes the event (the loop breaker's pause) calls it for the rows
-- it changed. Answers how many were queued.
create function queue_operator_notice(event text, notice jsonb, only_webhook uuid default null) returns integer language plpgsql as $$
declare
  queued uuid[];
begin
  with n as (
    insert into operator_notices (webhook_id, event, notice)
    select w.id, event, notice from operator_webhooks w where only_webhook is null or w.id = only_webhook
    returning id
  )
  select array_agg(id) into queued from n;
  perform operator_notice_jobs(queued, 1);
  return coalesce(array_length(queued, 1), 0);
end $$;

-- The agents' webhooks operators were told are failing or switched off, so that they are told once
-- when one answers again, or is switched back on.
create table operator_endpoint_alerts (
  agent_id uuid primary key references agents (id) on delete cascade,
  told text not null check (told in ('warned', 'switched_off')),
  told_at timestamptz not null default now()
);

-- People's changes of operator webhooks are recorded in the audit trail under their own subject.
-- contract: the check only widens (one more subject type); every value the previous release
-- writes still passes, and it never reads the constraint.
alter table audit_events drop constraint audit_events_subject_type_check;
-- contract: the same check with one more value, so no row the previous release writes is refused.
alter table audit_events add constraint audit_events_subject_type_check
  check (subject_type in ('agent', 'thread', 'message', 'delivery', 'person', 'operator_webhook'));
