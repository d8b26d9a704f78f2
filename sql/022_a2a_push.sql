-- A2A push-notification configurations (docs/a2a.md): where the sender of a message wants to be
-- told that its task moved on. A task is a delivery, so a configuration belongs to one delivery
-- and to the agent that sent its message; it goes with the delivery. `pushed` is the task status
-- last delivered to the URL, so that a push is sent only for a change.
create table a2a_push_configs (
  id uuid primary key default uuid_v7(),
  delivery_id uuid not null references deliveries(id) on delete cascade,
  owner_id uuid not null references agents(id) on delete cascade,
  -- The client's name for it (A2A's config id), or one given here.
  name text not null,
  url text not null,
  token text not null default '',
  auth_scheme text not null default '',
  auth_credentials text not null default '',
  pushed text,
  created_at timestamptz not null default now(),
  unique (delivery_id, name)
);
create index a2a_push_configs_owner_idx on a2a_push_configs (owner_id);

-- A push is queued in the transaction that moves the task: a step of its delivery, or the
-- recipient's answer (a message in the thread after it). Queued by key, one per configuration at
-- a time; the job reads the task as it is when it runs, so moves close together make one push.
-- (plpgsql, which resolves names when it runs: graphile-worker's schema is installed after ours.)
-- The task's name is PUSH_TASK's (src/domain/deliveries/push-configs.ts).
create function a2a_push_jobs(configs uuid[]) returns void language plpgsql as $$
begin
  perform graphile_worker.add_jobs(array(
    select json_populate_record(null::graphile_worker.job_spec, json_build_object(
      'identifier', 'a2a_push', 'payload', json_build_object('configId', c),
      'max_attempts', 6, 'job_key', 'a2a_push:' || c))
    from unnest(configs) c));
end $$;

create function a2a_push_on_step() returns trigger language plpgsql as $$
begin
  if exists (select 1 from a2a_push_configs where delivery_id = new.id) then
    perform a2a_push_jobs(array(select id from a2a_push_configs where delivery_id = new.id));
  end if;
  return null;
end $$;

create function a2a_push_on_answer() returns trigger language plpgsql as $$
begin
  if exists (select 1 from a2a_push_configs) then
    perform a2a_push_jobs(array(
      select c.id from a2a_push_configs c
      join deliveries d on d.id = c.delivery_id
      join new_messages m on m.thread_id = d.thread_id and m.sender_agent_id = d.recipient_id and m.id > d.message_id));
  end if;
  return null;
end $$;

-- contract: the previous release's step moves and posts run these too; they queue a push only for
-- a configuration, which only this release creates, and with none they look up one index entry.
create trigger deliveries_a2a_push after update of step on deliveries
  for each row when (old.step is distinct from new.step)
  execute function a2a_push_on_step();

-- contract: as above.
create trigger messages_a2a_push after insert on messages
  referencing new table as new_messages for each statement
  execute function a2a_push_on_answer();
