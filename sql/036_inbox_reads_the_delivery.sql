-- An inbox page shows, of each message, its sender, its one-line summary and whether it carries
-- files. Read from `messages` that is fifty index descents a page, most of the page's cost
-- (docs/internals/performance.md#the-inbox-page-against-a-bare-select); a message never changes,
-- so each delivery now carries its own copy, written with it by the post's statement, while it is
-- in the inbox: the acknowledgement clears the text, so that what the copies take follows the
-- backlog, not the history. Null in rows written before this migration: the inbox reads those
-- from the message as before.
alter table deliveries
  add column sender text,
  -- The line the inbox shows: the sender's summary, else the body's first line, cut
  -- (src/domain/messages/summary-line.ts).
  add column summary text,
  add column carries_files boolean;
