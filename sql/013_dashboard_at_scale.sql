-- The dashboard at hundreds of deliveries: every list it shows is a keyset page (newest first, by
-- id), and each filter it offers walks an index of its own instead of the whole table.

-- Deliveries by recipient and by thread, newest first.
create index deliveries_recipient_page_idx on deliveries (recipient_id, id);
create index deliveries_thread_page_idx on deliveries (thread_id, id);
-- The states that need a person: small partial indexes, which also serve the counts shown in the
-- navigation (index-only scans over the few rows in each state).
create index deliveries_failed_idx on deliveries (id) where step = 'failed';
create index deliveries_retrying_idx on deliveries (id) where step = 'accepted' and next_attempt_at is not null;
create index deliveries_awaiting_report_idx on deliveries (notified_at, id) where step = 'notified' and delivered_at is null;
-- Threads waiting for a person's decision on a close request.
create index threads_close_pending_idx on threads (id) where state = 'close-pending';

-- Open dashboards hear of changes to threads (opened, close requested, decided, a participant
-- added or removed) and to agents (registered, archived, a webhook added or removed), so that the
-- Threads and Agents pages stay live. These writes are rare, so notifying inside their transaction
-- costs nothing the busy paths (posts, doorbell attempts) pay.
create function notify_thread_listing() returns trigger
language plpgsql as $$
begin
  perform pg_notify('ams_dashboard', 'thread:' || new.id::text);
  return null;
end
$$;

create trigger threads_listing_changed
  after insert or update of state, title, goal on threads for each row execute function notify_thread_listing();

create function notify_participant_listing() returns trigger
language plpgsql as $$
begin
  perform pg_notify('ams_dashboard', 'thread:' || coalesce(new.thread_id, old.thread_id)::text);
  return null;
end
$$;

create trigger participants_listing_changed
  after insert or delete on participants for each row execute function notify_participant_listing();

create function notify_agent_listing() returns trigger
language plpgsql as $$
begin
  perform pg_notify('ams_dashboard', 'agent:' || new.id::text);
  return null;
end
$$;

create trigger agents_listing_changed
  after insert or update of archived_at, webhook_url on agents for each row execute function notify_agent_listing();
