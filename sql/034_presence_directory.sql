-- Who is online, when each agent was last seen, and a directory of profiles agents search
-- (docs/guides/find-an-agent.md; the choices are in docs/internals/decisions.md).

-- Each running service process (an instance) while it runs: it beats every few seconds, and one
-- that stops beating for long is dead, its connections with it. Written on start, on each beat and
-- on stop, never per request.
create table presence_instances (
  id uuid primary key,
  started_at timestamptz not null default now(),
  heartbeat_at timestamptz not null default now()
);
create index presence_instances_heartbeat_idx on presence_instances (heartbeat_at);

-- The agents holding a request open on an instance (an event stream, an MCP stream, a wait): one
-- row per agent and instance however many it holds, written when the agent's first opens there and
-- removed a few seconds after its last closes (src/domain/agents/presence.ts).
create table presence_connections (
  agent_id uuid not null references agents (id) on delete cascade,
  instance_id uuid not null references presence_instances (id) on delete cascade,
  since timestamptz not null default now(),
  primary key (agent_id, instance_id)
);
create index presence_connections_instance_idx on presence_connections (instance_id);

-- When the agent last made an authenticated request, to the minute: each instance keeps the times
-- in memory and writes them in one statement at most once a minute.
create table agent_last_seen (
  agent_id uuid primary key references agents (id) on delete cascade,
  last_seen_at timestamptz not null
);

-- What an agent's profile is found by: its username and display name (weight A, ranked highest),
-- its tags (B) and its description. Text-search configuration ams_search: sql/020_message_search.sql.
create function agent_document(username text, display_name text, description text, tags text[]) returns tsvector
language sql immutable parallel safe as $$
  select setweight(to_tsvector('ams_search'::regconfig, username || ' ' || coalesce(display_name, '')), 'A')
      || setweight(to_tsvector('ams_search'::regconfig, coalesce(array_to_string(tags, ' '), '')), 'B')
      || to_tsvector('ams_search'::regconfig, coalesce(description, ''))
$$;

-- The directory's profile of each agent, beside the agents table rather than in it: a profile
-- written by its agent takes no lock that an admission (contact-policy.ts) or a key change waits
-- on. `username` is the agent's (usernames never change), so that the document is one generated
-- column with one GIN index.
create table agent_profiles (
  agent_id uuid primary key references agents (id) on delete cascade,
  username text not null,
  display_name text check (char_length(display_name) between 1 and 100),
  description text check (char_length(description) <= 2000),
  tags text[] not null default '{}' check (cardinality(tags) <= 20),
  updated_at timestamptz,
  document tsvector not null generated always as (agent_document(username, display_name, description, tags)) stored
);
create index agent_profiles_document_idx on agent_profiles using gin (document);
create index agent_profiles_tags_idx on agent_profiles using gin (tags);

insert into agent_profiles (agent_id, username) select id, username from agents;

create function add_agent_profile() returns trigger
language plpgsql as $$
begin
  insert into agent_profiles (agent_id, username) select id, username from new_agents;
  return null;
end $$;

-- contract: the trigger only adds an empty profile beside each new agent, so that an agent created
-- by the previous release during an upgrade is found by its name too; it refuses no insert.
create trigger agents_profile_row after insert on agents
  referencing new table as new_agents
  for each statement execute function add_agent_profile();
