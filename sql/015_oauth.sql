-- OAuth 2.1 sign-in for MCP clients (src/oauth): what the authorization server keeps, and the
-- connections people approved on the dashboard.

-- Every artifact of the authorization server (registered clients, grants, codes, access and refresh
-- tokens, interactions, sessions), by kind and the SHA-256 of its id. For a code or a token the id
-- is the credential itself, so no credential is ever stored as itself.
create table oauth_artifacts (
  model text not null,
  id_hash bytea not null,
  payload jsonb not null,
  grant_id text,
  uid_hash bytea,
  expires_at timestamptz,
  primary key (model, id_hash)
);
create index oauth_artifacts_grant_idx on oauth_artifacts (grant_id) where grant_id is not null;
create index oauth_artifacts_uid_idx on oauth_artifacts (uid_hash) where uid_hash is not null;
create index oauth_artifacts_expiry_idx on oauth_artifacts (expires_at) where expires_at is not null;

-- A client a person connected to an agent: the grant its tokens are issued under. A token acts only
-- while this row exists and its agent is not archived (domain/oauth-connections.ts checks both in
-- the statement that reads the token).
-- The client's name and address are kept as the person saw them when approving: a client named by
-- its metadata document (an https client_id) has no registration stored here to read them from.
create table oauth_connections (
  grant_id text primary key,
  agent_id uuid not null references agents (id) on delete cascade,
  client_id text not null,
  client_name text,
  client_uri text,
  approved_by uuid references people (id) on delete set null,
  approved_at timestamptz not null default now(),
  last_used_at timestamptz
);
create index oauth_connections_agent_idx on oauth_connections (agent_id, approved_at desc);

-- However a connection goes (Disconnect on the dashboard, the grant revoked by its client, the
-- agent archived or deleted), everything issued under its grant goes with it, in the same
-- transaction; the Agents page hears of it.
create function oauth_connection_changed() returns trigger
language plpgsql as $$
begin
  if tg_op = 'DELETE' then
    delete from oauth_artifacts where grant_id = old.grant_id;
  end if;
  perform pg_notify('ams_dashboard', 'agent:' || coalesce(new.agent_id, old.agent_id)::text);
  return null;
end
$$;

create trigger oauth_connections_changed
  after insert or delete or update of last_used_at on oauth_connections
  for each row execute function oauth_connection_changed();

-- Archiving an agent ends its connections for good: unlike its key, they do not come back when it
-- is unarchived; a person connects the client again.
create function oauth_end_connections_of_archived() returns trigger
language plpgsql as $$
begin
  delete from oauth_connections where agent_id = new.id;
  return null;
end
$$;

create trigger agents_archived_end_oauth_connections
  after update of archived_at on agents
  for each row when (new.archived_at is not null and old.archived_at is null)
  execute function oauth_end_connections_of_archived();

-- Client registrations by address, for the per-address limit on open registration
-- (domain/oauth-connections.ts): kept for the limit's window only.
create table oauth_registration_attempts (
  client text not null,
  attempted_at timestamptz not null default now()
);
create index oauth_registration_attempts_idx on oauth_registration_attempts (client, attempted_at);

-- The authorization server's signing keys and cookie keys, made once for every instance.
create table oauth_keys (
  singleton boolean primary key default true check (singleton),
  jwks jsonb not null,
  cookie_keys text[] not null
);
