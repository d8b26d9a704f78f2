-- Every process caches the agents its keys authenticated (src/db/agent-cache.ts) and drops one
-- when it hears the agent's id on ams_agents. The database sends it for every change to what a
-- key authenticates as, whoever makes the change (the API, the CLI, plain SQL), in the
-- transaction that makes it: revocation does not depend on each writer remembering to notify.
create function notify_agent_change() returns trigger
language plpgsql as $$
begin
  perform pg_notify('ams_agents', old.id::text);
  return null;
end
$$;

create trigger agents_key_answer_changed
  after update of archived_at, key_hash, username on agents for each row
  when ((old.archived_at is null) <> (new.archived_at is null)
        or old.key_hash <> new.key_hash
        or old.username <> new.username)
  execute function notify_agent_change();

create trigger agents_deleted
  after delete on agents for each row execute function notify_agent_change();
