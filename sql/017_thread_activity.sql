-- The Threads page lists threads by their last activity, most recent first: the latest of the
-- thread's opening, its newest message, a close request, a close and a declined close, each at the
-- time of the transaction that made it (as messages.created_at and closed_at are). It is kept on
-- the thread by the statements that post and change state (domain/threads/activity.ts says how),
-- so that the page reads an index and never the messages.
-- A thread opened by the previous release during an upgrade gets its opening time from the
-- default; its posts and decisions do not move it until the next one made by this release.
alter table threads add column last_activity_at timestamptz not null default now();

-- Threads as they stand. A decline was never recorded, so an old one does not count; messages
-- pruned for retention no longer count either.
update threads t
set last_activity_at = greatest(t.created_at, t.close_requested_at, t.closed_at, newest.at)
from threads s
left join (select thread_id, max(created_at) as at from messages group by thread_id) newest on newest.thread_id = s.id
where s.id = t.id;

-- The page's order, and its keyset: (last activity, id), both descending.
create index threads_activity_idx on threads (last_activity_at desc, id desc);
