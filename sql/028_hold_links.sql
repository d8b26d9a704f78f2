-- One-time links in the emails about held messages (domain/messages/hold-links.ts): each names one
-- waiting message for one person, and takes that person, once signed in, to its decision on the
-- Overview. Only the token's hash is kept. A link is spent by its first use, and is worth nothing
-- once its message is decided or its hold expires (then it is deleted by the expiry sweep).
create table hold_links (
  token_hash bytea primary key,
  message_id uuid not null references held_messages (id) on delete cascade,
  person_id uuid not null references people (id) on delete cascade,
  expires_at timestamptz not null,
  used_at timestamptz
);
create index hold_links_expiry_idx on hold_links (expires_at);
create index hold_links_message_idx on hold_links (message_id);
