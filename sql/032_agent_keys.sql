-- Several keys per agent (docs/reference/http-api.md#keys): up to five at once, each with a name,
-- an optional expiry and a coarse last use, so that an agent rotates its key (a new one, then the
-- old one revoked) without becoming another agent. agents.key_hash stays for the previous release,
-- which authenticates by it alone: it keeps the key the agent was created with until that key is
-- revoked, and then a hash no key has.
create table agent_keys (
  id uuid primary key default uuid_v7(),
  agent_id uuid not null references agents (id) on delete cascade,
  -- Which of the agent's five places the key takes: the check and the uniqueness keep the most in
  -- the statement that inserts, however many insert at once.
  slot smallint not null check (slot between 1 and 5),
  name text not null check (length(name) between 1 and 64),
  -- SHA-256 of the agt_ key; the key itself is shown once and never stored.
  key_hash bytea not null unique,
  -- What the key starts with (agt_ and 8 more characters), which lists and logs name it by. Null for
  -- a key made before keys had names, until its first use fills it in.
  prefix text,
  created_at timestamptz not null default now(),
  -- Written at most once a minute per key, from each instance's memory (src/db/key-use.ts).
  last_used_at timestamptz,
  expires_at timestamptz,
  unique (agent_id, slot)
);
create index agent_keys_agent_idx on agent_keys (agent_id);

-- Every agent has its key here from the moment it exists, whichever release creates it: the
-- previous one writes only agents.key_hash. This release inserts the key itself, in the statement
-- that creates the agent, and the copy then finds it there.
create function agent_first_key() returns trigger language plpgsql as $$
begin
  insert into agent_keys (agent_id, slot, name, key_hash, created_at)
  values (new.id, 1, 'initial', new.key_hash, new.created_at)
  on conflict do nothing;
  return null;
end $$;

-- contract: the previous release's inserts into agents run it; it only copies the new agent's key
-- hash into agent_keys, which that release never reads, and fails on nothing the insert did not.
create trigger agents_first_key after insert on agents for each row execute function agent_first_key();

-- The agents that exist already keep their one key, unchanged: the same hash, now in agent_keys.
-- The trigger above was created first, so an agent inserted meanwhile is copied by one or the other.
insert into agent_keys (agent_id, slot, name, key_hash, created_at)
select id, 1, 'initial', key_hash, created_at from agents
on conflict do nothing;

-- A key revoked (deleted) or given another expiry changes what a presented key answers for: every
-- instance's cache drops the agent and every stream held open for it asks again, as for archiving
-- (sql/007_agent_changes_notify.sql). A revoked key that agents.key_hash still holds is replaced
-- there by a hash no key has, so that the previous release refuses it too.
create function agent_key_changed() returns trigger language plpgsql as $$
begin
  if tg_op = 'DELETE' then
    update agents set key_hash = sha256(uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()))
    where id = old.agent_id and key_hash = old.key_hash;
  end if;
  perform pg_notify('ams_agents', old.agent_id::text);
  return null;
end $$;

-- contract: the previous release changes agent_keys only through agents: its inserts (copied above)
-- and an agent deleted, whose keys go with it; then this notifies as sql/007 already does, and the
-- agent's row, gone, is not updated.
create trigger agent_keys_changed after delete or update of key_hash, expires_at, agent_id on agent_keys
  for each row execute function agent_key_changed();
