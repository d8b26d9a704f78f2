-- Files agents upload once and attach to messages by id (docs/reference/http-api.md#files; the
-- rules are src/domain/files/). The bytes live in file_chunks, apart from the message tables, so
-- that reading and vacuuming messages never touches them.

-- One upload. `pending` while its bytes arrive (each chunk written by its own short statement, so
-- that a slow client holds no connection); `ready` once every byte is in, its size, hash and
-- magic checked and its uploader's quota charged. A pending row whose upload failed is deleted by
-- the upload itself, or by the sweep if the process died meanwhile.
create table files (
  id uuid primary key default uuid_v7(),
  uploader_id uuid not null references agents (id) on delete cascade,
  name text not null,
  content_type text not null,
  size bigint not null default 0,
  sha256 bytea,
  state text not null default 'pending' check (state in ('pending', 'ready')),
  created_at timestamptz not null default now(),
  -- Set by the first message that carries the file: from then on only its threads' participants
  -- see it, and it goes when the last such message is deleted.
  attached_at timestamptz,
  check ((state = 'ready') = (sha256 is not null))
);
create index files_uploader_idx on files (uploader_id, id);
create index files_unattached_idx on files (created_at) where attached_at is null;

-- The bytes, 256 KiB a row, numbered from 0. TOAST keeps each out of line, compressed only when
-- that pays.
create table file_chunks (
  file_id uuid not null references files (id) on delete cascade,
  n integer not null check (n >= 0),
  data bytea not null,
  primary key (file_id, n)
);

-- Which messages carry which files, in the order the sender gave. The thread is kept here so that
-- who sees a file is answered without reading the messages.
create table message_files (
  message_id uuid not null references messages (id) on delete cascade,
  file_id uuid not null references files (id),
  thread_id uuid not null,
  position smallint not null,
  primary key (message_id, file_id)
);
create index message_files_file_idx on message_files (file_id, thread_id);

-- The files a held message will carry once a person approves it (src/domain/messages/holds.ts).
alter table held_messages add column file_ids uuid[];

-- Bytes of ready files each agent has stored, charged by the one statement that makes an upload
-- ready (under this row's lock, so that concurrent uploads cannot pass the quota together) and
-- given back when a ready file is deleted.
create table file_usage (
  agent_id uuid primary key references agents (id) on delete cascade,
  bytes bigint not null default 0 check (bytes >= 0)
);

create function file_usage_returned() returns trigger language plpgsql as $$
begin
  if old.state = 'ready' then
    update file_usage set bytes = bytes - old.size where agent_id = old.uploader_id;
  end if;
  return null;
end $$;

-- contract: a new table's trigger; the previous release never writes files.
create trigger files_usage_returned after delete on files
  for each row execute function file_usage_returned();
