-- Core records: agents, threads, participants, messages, deliveries and the per-delivery attempt log.

-- Time-ordered UUIDs (RFC 9562 version 7, with the sub-millisecond clock in rand_a) so that ids
-- sort in creation order, inbox and listings can page on the primary key, and b-tree inserts stay
-- at the right edge of the index. PostgreSQL 18 has uuidv7(); 15 does not, so we carry our own.
create function uuid_v7() returns uuid
language sql volatile parallel safe as $$
  with t as (select extract(epoch from clock_timestamp()) * 1000 as ms)
  select encode(
    set_bit(set_bit(set_bit(
      overlay(
        overlay(uuid_send(gen_random_uuid())
          placing substring(int8send(floor(t.ms)::bigint) from 3) from 1 for 6)
        placing int2send(floor((t.ms - floor(t.ms)) * 4096)::smallint) from 7 for 2),
      52, 1), 53, 1), 54, 1),
    'hex')::uuid
  from t
$$;

create table agents (
  id uuid primary key default uuid_v7(),
  username text not null unique,
  -- SHA-256 of the agt_ key; the key itself is shown once and never stored.
  key_hash bytea not null unique,
  archived_at timestamptz,
  webhook_url text,
  -- Stays readable on the dashboard by contract, so it cannot be hashed.
  signing_secret text,
  webhook_set_at timestamptz,
  created_at timestamptz not null default now(),
  check ((webhook_url is null) = (signing_secret is null))
);

create type thread_state as enum ('open', 'close-pending', 'closed');

create table threads (
  id uuid primary key default uuid_v7(),
  title text not null,
  goal text,
  state thread_state not null default 'open',
  opened_by uuid not null references agents (id),
  close_requested_at timestamptz,
  closed_at timestamptz,
  created_at timestamptz not null default now()
);

create table participants (
  thread_id uuid not null references threads (id) on delete cascade,
  agent_id uuid not null references agents (id),
  joined_at timestamptz not null default now(),
  primary key (thread_id, agent_id)
);
create index participants_agent_idx on participants (agent_id, thread_id);

create table messages (
  id uuid primary key default uuid_v7(),
  thread_id uuid not null references threads (id) on delete cascade,
  -- Null when a person posted from the dashboard; sender keeps the name either way.
  sender_agent_id uuid references agents (id),
  sender text not null,
  content text not null,
  summary text,
  created_at timestamptz not null default now()
);
create index messages_thread_idx on messages (thread_id, id);

-- The steps in the order a delivery passes them. 'failed' stands apart: failed_step keeps the step
-- it had reached, and the domain moves steps only forward (see src/domain/deliveries.ts).
create type delivery_step as enum ('accepted', 'notified', 'delivered', 'fetched', 'failed');

create table deliveries (
  id uuid primary key default uuid_v7(),
  message_id uuid not null references messages (id) on delete cascade,
  thread_id uuid not null,
  recipient_id uuid not null references agents (id),
  step delivery_step not null default 'accepted',
  failed_step delivery_step,
  error text,
  -- True when the recipient had a webhook when the message was accepted: a doorbell is owed.
  webhook boolean not null,
  -- Publishes to the queue (the original counts as the first) and send attempts within the
  -- current publish; both start afresh when a person resends a failed delivery.
  publish_attempts smallint not null default 0,
  send_attempts smallint not null default 0,
  created_at timestamptz not null default now(),
  notified_at timestamptz,
  delivered_at timestamptz,
  fetched_at timestamptz,
  acknowledged_at timestamptz,
  unique (message_id, recipient_id),
  check ((step = 'failed') = (failed_step is not null))
);
-- The inbox: one agent's unacknowledged deliveries, oldest first. Acknowledged rows drop out of
-- the index, so its size follows the backlog, not the history.
create index deliveries_inbox_idx on deliveries (recipient_id, id) where acknowledged_at is null;
-- Fetching by message id for one recipient (read_message, acknowledge over MCP).
create index deliveries_recipient_message_idx on deliveries (recipient_id, message_id);
-- The re-publish sweep looks only at doorbells still owed.
create index deliveries_owed_idx on deliveries (created_at) where webhook and step = 'accepted';

create table delivery_attempts (
  id bigint generated always as identity primary key,
  delivery_id uuid not null references deliveries (id) on delete cascade,
  publish smallint not null,
  attempt smallint not null,
  attempted_at timestamptz not null default now(),
  duration_ms integer not null,
  status integer,
  error text
);
create index delivery_attempts_delivery_idx on delivery_attempts (delivery_id, id);
