-- People hear of what waits for them (docs/guides/govern-agents.md): an email digest when messages
-- start waiting, an email when the loop breaker pauses a thread, and open dashboards that update
-- as messages are held and decided.

-- When the digest of waiting messages last went out. One row, locked by the instance that sends,
-- so that several instances send one digest, and at most one per interval.
create table hold_notices (
  kind text primary key check (kind in ('waiting')),
  sent_at timestamptz not null
);
insert into hold_notices (kind, sent_at) values ('waiting', '-infinity');

-- When a digest first counted the message: null while no digest has told people of it.
alter table held_messages add column noticed_at timestamptz;
create index held_messages_unnoticed_idx on held_messages (id) where state = 'held' and noticed_at is null;

-- Each pause the loop breaker made that people were emailed about: a resumed and paused-again
-- thread has a new paused_at, and so a new email.
create table thread_pause_notices (
  thread_id uuid not null references threads (id) on delete cascade,
  paused_at timestamptz not null,
  primary key (thread_id, paused_at)
);

-- The paused threads, for the Overview, the metric and the emails.
create index threads_paused_idx on threads (paused_at) where paused_at is not null;

-- Open dashboards hear of a message held or decided as a change to its thread (sql/013), so that
-- the "Waiting for you" list and its count stay live. Holds are rare next to posts, so the
-- notification in the holding transaction costs the busy path nothing.
create function notify_held_listing() returns trigger
language plpgsql as $$
begin
  perform pg_notify('ams_dashboard', 'thread:' || new.thread_id::text);
  return null;
end
$$;

-- contract: a new table's trigger; the previous release never writes held_messages.
create trigger held_messages_listing_changed
  after insert or update of state on held_messages for each row execute function notify_held_listing();
