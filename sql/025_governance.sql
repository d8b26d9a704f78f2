-- People govern agents (docs/guides/govern-agents.md): who may put an agent in a thread, how much
-- an agent may send, which messages wait for a person's yes, and the record of every decision
-- people make. Every default is today's behaviour: an upgraded deployment changes nothing until a
-- person does.

-- Who may put the agent in a thread: `open` (anyone), `contacts` (agents on its allow list or that
-- already share a thread with it), `closed` (only people). The agent's block list wins over all.
-- Quota overrides: null means the deployment's default (SEND_MESSAGES_PER_MINUTE and
-- SEND_THREADS_PER_HOUR). holds_messages: every message the agent sends waits for a person.
alter table agents
  add column contact_policy text not null default 'open' check (contact_policy in ('open', 'contacts', 'closed')),
  add column holds_messages boolean not null default false,
  add column messages_per_minute integer check (messages_per_minute > 0),
  add column threads_per_hour integer check (threads_per_hour > 0);

-- An agent's allow and block lists: one entry per other agent, on one list or the other.
create table agent_contacts (
  agent_id uuid not null references agents (id) on delete cascade,
  contact_id uuid not null references agents (id) on delete cascade,
  list text not null check (list in ('allow', 'block')),
  added_at timestamptz not null default now(),
  primary key (agent_id, contact_id),
  check (agent_id <> contact_id)
);
create index agent_contacts_contact_idx on agent_contacts (contact_id);

-- holds_messages: a person marked the thread, so every agent's message in it waits. paused_at: the
-- loop breaker paused it (its agents exchanged too many messages with no person's among them);
-- posts are held until a person resumes it. loop_counted_from: the loop breaker counts only
-- messages after it (a resume sets it, so that the messages that tripped it do not trip it again).
alter table threads
  add column holds_messages boolean not null default false,
  add column paused_at timestamptz,
  add column loop_counted_from timestamptz;

-- Send quotas, counted in the statement that writes what they count: one row per agent and kind,
-- the count of the window that starts at window_start (a minute for messages, an hour for
-- threads). Unlogged: a crash empties the counts, which only gives agents a fresh window; nothing
-- else is lost, and posts write no WAL for their counting.
create unlogged table send_counts (
  agent_id uuid not null,
  kind text not null check (kind in ('message', 'thread')),
  window_start timestamptz not null,
  count integer not null,
  primary key (agent_id, kind)
);

-- A message that waits for a person. It has no deliveries and is in no thread's history: it exists
-- for its sender (its receipt says held) and for the people who decide. Approved, it is written to
-- messages under the same id, with its deliveries and doorbell jobs, in the approving transaction;
-- rejected (by a person, or on expiry), it reaches nobody and stays here, marked, with the reason.
create table held_messages (
  id uuid primary key,
  thread_id uuid not null references threads (id) on delete cascade,
  sender_agent_id uuid not null references agents (id) on delete cascade,
  sender text not null,
  content text not null,
  summary text,
  -- Why it waits: its sender is held, its thread is held, or the loop breaker paused its thread.
  reason text not null check (reason in ('agent', 'thread', 'loop')),
  state text not null default 'held' check (state in ('held', 'approved', 'rejected')),
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  decided_at timestamptz,
  -- The deciding person; null with decided_at set: the hold expired.
  decided_by uuid references people (id) on delete set null,
  decided_by_name text,
  rejection_reason text,
  check ((state = 'held') = (decided_at is null)),
  check ((state = 'rejected') = (rejection_reason is not null))
);
create index held_messages_waiting_idx on held_messages (expires_at) where state = 'held';
create index held_messages_thread_idx on held_messages (thread_id, id);
create index held_messages_sender_idx on held_messages (sender_agent_id, id);

-- A sender's events about its held messages (message.held, message.approved, message.rejected)
-- name the message, not a delivery: it has none while held.
alter table agent_events add column message_id uuid;
-- contract: widens what an event may name; the previous release writes delivery_id on every row as
-- before, and reads an event without one as nothing (its join to deliveries finds no row).
alter table agent_events alter column delivery_id drop not null;
-- contract: widens the types; the previous release never writes the new ones and skips them when
-- reading (they name no delivery).
alter table agent_events drop constraint agent_events_type_check;
-- contract: the same rule as the one it replaces, with three more types; every row that exists or
-- that the previous release writes passes it.
alter table agent_events add constraint agent_events_type_check
  check (type in ('message.created', 'delivery.delivered', 'delivery.fetched', 'message.held', 'message.approved', 'message.rejected'));

-- A held message's sender hears of it, and of the decision, on its event stream, whoever writes the
-- change (a post, a person, the expiry sweep).
create function agent_events_for_holds() returns trigger language plpgsql as $$
begin
  if tg_op = 'UPDATE' and old.state = new.state then
    return null;
  end if;
  insert into agent_events (agent_id, type, message_id)
  select new.sender_agent_id, 'message.' || new.state, new.id
  from agents a where a.id = new.sender_agent_id and a.events_recorded_since is not null;
  if found then
    perform pg_notify('ams_events', new.sender_agent_id::text);
  end if;
  return null;
end $$;
-- contract: a new table's trigger; the previous release never writes held_messages.
create trigger held_messages_events after insert or update of state on held_messages
  for each row execute function agent_events_for_holds();

-- Every decision a person makes (and the CLI's, and the expiry of a hold): who, when, what, and the
-- subject before and after. Pruned by AUDIT_RETENTION_DAYS.
create table audit_events (
  id uuid primary key default uuid_v7(),
  at timestamptz not null default now(),
  -- The person who decided; null for the CLI and for the service itself (an expiry).
  person_id uuid references people (id) on delete set null,
  actor text not null,
  action text not null,
  subject_type text not null check (subject_type in ('agent', 'thread', 'message', 'delivery', 'person')),
  subject text not null,
  before jsonb,
  after jsonb,
  reason text
);
create index audit_events_at_idx on audit_events (at);
create index audit_events_subject_idx on audit_events (subject_type, subject, id);
create index audit_events_action_idx on audit_events (action, id);
