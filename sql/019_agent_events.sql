-- What an agent's event stream (GET /api/events) reads: one row per event, for the agent it is
-- for. Rows are written by the triggers below, inside the transaction that makes the change,
-- whoever makes it (a post of this release or of the previous one during an upgrade, a report,
-- a read): no door can forget one.
--
-- Order, and resuming without a gap: an event's position is (xid, seq), the writing transaction's
-- id and then the order within it. A reader hands out only events whose transaction is older than
-- every transaction still running (xid < pg_snapshot_xmin of its snapshot), so no event can later
-- commit behind a position already handed out (domain/deliveries/agent-events.ts).
--
-- The row names the delivery, not a copy of it: the event's fields are read from the delivery,
-- its message and its thread when it is sent. No foreign keys: a delivery pruned with its message
-- (MESSAGE_RETENTION_DAYS) leaves an event that reads as nothing, and the log is kept apart from
-- the tables it points into so that writing it costs one index.
create table agent_events (
  agent_id uuid not null,
  xid xid8 not null default pg_current_xact_id(),
  seq bigint generated always as identity,
  type text not null check (type in ('message.created', 'delivery.delivered', 'delivery.fetched')),
  delivery_id uuid not null,
  created_at timestamptz not null default now(),
  primary key (agent_id, xid, seq)
);
-- The retention sweep's range; rows are appended in time order, so a BRIN index is all it needs.
create index agent_events_created_idx on agent_events using brin (created_at);

-- Per agent, the newest position the retention sweep removed: a stream asked to resume from before
-- it answers that the events in between are gone, instead of skipping them silently.
create table agent_event_floors (
  agent_id uuid primary key,
  xid xid8 not null,
  seq bigint not null
);

-- Events are recorded for an agent from the first time it opens a stream (set by
-- domain/deliveries/agent-events.ts, never cleared): an agent that only polls or has a webhook
-- costs its posts nothing here but the look-up of this column.
alter table agents add column events_recorded_since timestamptz;

-- A new delivery is a message.created event for its recipient. The stream's wake-up is the inbox
-- notification every post already sends (domain/deliveries/delivery-wake-ups.ts), after its commit:
-- a delivery written by plain SQL is recorded all the same, and sent with the agent's next wake-up.
create function agent_events_for_new_deliveries() returns trigger language plpgsql as $$
begin
  insert into agent_events (agent_id, type, delivery_id)
  select d.recipient_id, 'message.created', d.id
  from added d join agents a on a.id = d.recipient_id
  where a.events_recorded_since is not null
  order by d.id;
  return null;
end $$;
-- contract: the previous release's posts run into it and are unaffected: it only appends to a table
-- that release never reads, and refuses nothing.
create trigger deliveries_added_events after insert on deliveries
  referencing new table as added for each statement
  execute function agent_events_for_new_deliveries();

-- A delivery reported delivered, or read for the first time, is a receipt event for the message's
-- sender, when the sender is an agent whose events are recorded. These writes notify the
-- delivery's watchers already (deliveries_changed), so the notification to the sender's stream
-- adds no lock of its own.
create function agent_events_for_receipts() returns trigger language plpgsql as $$
declare
  sender uuid;
begin
  select m.sender_agent_id into sender from messages m join agents a on a.id = m.sender_agent_id
  where m.id = new.message_id and a.events_recorded_since is not null;
  if sender is null then
    return null;
  end if;
  if old.delivered_at is null and new.delivered_at is not null then
    insert into agent_events (agent_id, type, delivery_id) values (sender, 'delivery.delivered', new.id);
  end if;
  if old.fetched_at is null and new.fetched_at is not null then
    insert into agent_events (agent_id, type, delivery_id) values (sender, 'delivery.fetched', new.id);
  end if;
  perform pg_notify('ams_events', sender::text);
  return null;
end $$;
-- contract: the previous release's reports and reads run into it and are unaffected: it only
-- appends to a table that release never reads and notifies a channel it never listens to.
create trigger deliveries_receipt_events after update of delivered_at, fetched_at on deliveries
  for each row
  when ((old.delivered_at is null and new.delivered_at is not null) or (old.fetched_at is null and new.fetched_at is not null))
  execute function agent_events_for_receipts();
