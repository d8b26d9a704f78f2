-- Full-text search over messages, for agents (GET /api/messages/search, the MCP tool
-- search_messages) and for the dashboard's delivery list (domain/messages/message-search.ts).

-- Trusted extensions (PostgreSQL 13+): the database's owner may create them without being a
-- superuser. Both ship with PostgreSQL's contrib, the embedded one included.
create extension if not exists unaccent;
create extension if not exists pg_trgm;

-- Agents write in many languages. 'simple' splits words and lowercases them without any one
-- language's stemming or stop words, so that no language is searched worse than another (and
-- "the" or "die" can be looked for); unaccent folds accents, so that "resume" finds "résumé".
-- The price: "invoice" does not find "invoices" (docs/agents.md says how to ask for both).
create text search configuration ams_search (copy = simple);
alter text search configuration ams_search
  alter mapping for hword, hword_part, word with unaccent, simple;

-- What a message is found by: its thread's title (weight A, ranked highest), its summary (B) and
-- its content. The one definition: the trigger below and the backfill use it.
create function message_document(title text, summary text, content text) returns tsvector
language sql immutable parallel safe as $$
  select setweight(to_tsvector('ams_search'::regconfig, title), 'A')
      || setweight(to_tsvector('ams_search'::regconfig, coalesce(summary, '')), 'B')
      || to_tsvector('ams_search'::regconfig, content)
$$;

-- One row per message, beside it rather than a column of it: adding a column filled for every row
-- would rewrite the messages table under an exclusive lock, and the document carries the thread's
-- title, which is not the message's (titles never change). thread_id is the message's, so that
-- the visibility rule and a thread filter apply through the index before any document is read.
create table message_search (
  message_id uuid primary key references messages (id) on delete cascade,
  thread_id uuid not null,
  document tsvector not null
);
create index message_search_document_idx on message_search using gin (document);
-- An agent's search starts from its threads: with this index PostgreSQL intersects them with the
-- words' matches instead of reading every match in the table.
create index message_search_thread_idx on message_search (thread_id);

-- Every message is indexed in the statement that inserts it, by whichever release inserted it: a
-- post by the previous release during an upgrade is found too. Once per statement, so that a
-- batched post (db/batcher.ts) indexes all its messages in one insert.
create function index_new_messages() returns trigger
language plpgsql as $$
begin
  insert into message_search (message_id, thread_id, document)
  select m.id, m.thread_id, message_document(t.title, m.summary, m.content)
  from new_messages m join threads t on t.id = m.thread_id;
  return null;
end $$;

-- contract: the trigger only adds a row beside each new message; it refuses no insert and changes
-- nothing the previous release reads.
create trigger messages_search_index after insert on messages
  referencing new table as new_messages
  for each statement execute function index_new_messages();

-- The messages already there are indexed afterwards, a batch at a time, by the worker
-- (indexOlderMessages in domain/messages/message-search.ts): indexing them here would hold every
-- post for as long as it takes (about a minute per million messages). The walk goes up to the
-- newest message at this moment: creating the trigger waited for every transaction that had
-- inserted into messages, so each message is either at most up_to or indexed by the trigger.
create table message_search_backfill (
  singleton boolean primary key default true check (singleton),
  up_to uuid,
  indexed_through uuid,
  done_at timestamptz
);
insert into message_search_backfill (up_to, done_at)
select newest.id, case when newest.id is null then now() end
from (select (select id from messages order by id desc limit 1) as id) newest;

-- The dashboard's thread search looks for any part of a title, goal or name (ILIKE '%text%');
-- trigram indexes answer that without reading every thread.
create index threads_title_trgm_idx on threads using gin (title gin_trgm_ops);
create index threads_goal_trgm_idx on threads using gin (goal gin_trgm_ops);
