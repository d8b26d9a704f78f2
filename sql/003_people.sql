-- People: team members who operate the service from the dashboard. Invite-only; they sign in
-- with a one-time code sent to their email and hold an expiring session.

create table people (
  id uuid primary key default uuid_v7(),
  -- Stored lowercased so that sign-in matches however the address is typed.
  email text not null unique,
  -- Shown as the sender when the person posts into a thread.
  username text not null unique,
  created_at timestamptz not null default now()
);

-- At most one outstanding code per person: asking again replaces it. Only the SHA-256 is kept.
create table sign_in_codes (
  person_id uuid primary key references people (id) on delete cascade,
  code_hash bytea not null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null
);

-- Only the SHA-256 of the cookie's token is kept, so a copy of the table signs nobody in.
create table sessions (
  token_hash bytea primary key,
  person_id uuid not null references people (id) on delete cascade,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null
);
create index sessions_person_idx on sessions (person_id);

-- Code requests and wrong codes, counted per email and per client address over a sliding window.
-- Kept in the database so that every instance behind a load balancer sees the same counts.
create table sign_in_attempts (
  id bigint generated always as identity primary key,
  kind text not null check (kind in ('code_request', 'wrong_code')),
  email text not null,
  client text not null,
  attempted_at timestamptz not null default now()
);
create index sign_in_attempts_email_idx on sign_in_attempts (kind, email, attempted_at);
create index sign_in_attempts_client_idx on sign_in_attempts (kind, client, attempted_at);

-- The dashboard's live view: every change a person would see on a delivery, whoever makes it
-- (the agent API, the webhook worker, a resend), wakes the listening dashboard processes.
create function notify_delivery_change() returns trigger
language plpgsql as $$
begin
  perform pg_notify('ams_delivery', new.id::text);
  return null;
end
$$;

create trigger deliveries_changed
  after insert or update of step, failed_step, error, notified_at, delivered_at, fetched_at, acknowledged_at
  on deliveries for each row execute function notify_delivery_change();

create function notify_delivery_attempt() returns trigger
language plpgsql as $$
begin
  perform pg_notify('ams_delivery', new.delivery_id::text);
  return null;
end
$$;

create trigger delivery_attempts_added
  after insert on delivery_attempts for each row execute function notify_delivery_attempt();
