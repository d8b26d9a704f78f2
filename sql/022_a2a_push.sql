-- A2A push-notification configurations (docs/a2a.md): where the sender of a message wants to be
-- told that its task moved on. A task is a delivery, so a configuration belongs to one delivery
-- and to the agent that sent its message; it goes with the delivery. It repeats the delivery's
-- thread, recipient and message so that a post finds the configurations its message answers by
-- one index, without reading the thread's deliveries.
create table a2a_push_configs (
  id uuid primary key default uuid_v7(),
  delivery_id uuid not null references deliveries(id) on delete cascade,
  owner_id uuid not null references agents(id) on delete cascade,
  thread_id uuid not null,
  recipient_id uuid not null,
  message_id uuid not null,
  -- The client's name for it (A2A's config id), or one given here.
  name text not null,
  url text not null,
  token text not null default '',
  auth_scheme text not null default '',
  auth_credentials text not null default '',
  -- The task status last delivered to the URL: a push is sent only for a change.
  pushed text,
  -- Set once the recipient has answered (a push is queued for it once, not for every later message).
  answered boolean not null default false,
  -- While a push to it is being sent: pushes of one configuration go one at a time, in order, so
  -- that an older status cannot arrive after a newer one.
  sending_until timestamptz,
  created_at timestamptz not null default now(),
  unique (delivery_id, name)
);
create index a2a_push_configs_answer_idx on a2a_push_configs (thread_id, recipient_id) where not answered;

-- A push is queued in the transaction that moves the task: a step of its delivery, or the
-- recipient's answer. Queued by key, one job per configuration (graphile-worker's public
-- add_jobs, plpgsql so that its names resolve when it runs: its schema is installed after ours).
-- The task's name is PUSH_TASK's (src/domain/deliveries/push-configs.ts). Pushes come after
-- doorbells when both are due (priority), as they are a courtesy to a caller, not the mail.
create function a2a_push_jobs(configs uuid[], run_at timestamptz default null) returns void language plpgsql as $$
begin
  if coalesce(array_length(configs, 1), 0) = 0 then return; end if;
  perform graphile_worker.add_jobs(array(
    select json_populate_record(null::graphile_worker.job_spec, json_build_object(
      'identifier', 'a2a_push', 'payload', json_build_object('configId', c), 'run_at', run_at,
      'max_attempts', 6, 'priority', 10, 'job_key', 'a2a_push:' || c))
    from unnest(configs) c));
end $$;

create function a2a_push_on_step() returns trigger language plpgsql as $$
begin
  perform a2a_push_jobs(array(select id from a2a_push_configs where delivery_id = new.id));
  return null;
end $$;

create function a2a_push_on_answer() returns trigger language plpgsql as $$
declare
  configs uuid[];
begin
  with answered as (
    update a2a_push_configs c set answered = true
    from new_messages m
    where not c.answered and c.thread_id = m.thread_id and c.recipient_id = m.sender_agent_id and c.message_id < m.id
    returning c.id
  )
  select array_agg(distinct id) into configs from answered;
  perform a2a_push_jobs(configs);
  return null;
end $$;

-- contract: the previous release's step moves run this too; it queues a push only for a
-- configuration, which only this release creates (one index probe when there is none).
create trigger deliveries_a2a_push after update of step on deliveries
  for each row when (old.step is distinct from new.step)
  execute function a2a_push_on_step();

-- contract: the previous release's posts run this too; it queues a push only for a configuration
-- awaiting its answer in the posted message's thread (one probe of a partial index per message).
create trigger messages_a2a_push after insert on messages
  referencing new table as new_messages for each statement
  execute function a2a_push_on_answer();
