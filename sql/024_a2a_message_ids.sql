-- The id an A2A client gave its message (A2A's messageId), kept as long as the message: a task's
-- history shows the message under it, so that the client finds its own message there. The same
-- value is the send's idempotency key, which is forgotten after IDEMPOTENCY_RETENTION_MS. A table
-- beside messages, as message_search is, since only messages sent over A2A have one.
create table a2a_message_ids (
  message_id uuid primary key references messages (id) on delete cascade,
  a2a_message_id text not null
);
