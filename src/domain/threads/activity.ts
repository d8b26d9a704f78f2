import type { Queries, Sql } from '../../db/connect';

// A thread's last activity, which orders the dashboard's Threads page: the latest of its opening,
// its newest message, a close request, a close and a declined close. Each counts at the time of
// the transaction that made it, as messages.created_at and closed_at do. Asking again to close,
// confirming twice and adding or removing a participant are not activity. It only moves forward: a
// transaction that started earlier but commits later leaves a newer value in place.
export const activityNow = (sql: Queries) => sql`last_activity_at = greatest(last_activity_at, now())`;

// Posts move a thread's last activity once it is older than this, so that it may lag the newest
// message by up to a tenth of a second. A stream of posts to one busy thread then writes its row
// ten times a second at most instead of once per statement: every write is a new row version with
// new index entries, and makes the next statement's write wait for this one's commit. Written on
// every statement, posts to one thread lost about a seventh of their throughput in the bench
// (docs/internals/performance-history.md); written this way, nothing measurable.
const POSTS_MOVE_AFTER = '100 milliseconds';

// The threads `threadIds` (a query of thread ids) marked active by posts, each row once however many
// posts of a statement went to it. The rows are locked in id order first, so that two statements
// posting to the same threads wait for each other instead of deadlocking; a row that a concurrent
// statement moved meanwhile is read again at its newest version and left alone.
export const markActive = (sql: Queries, threadIds: ReturnType<Sql>) => sql`
  update threads set ${activityNow(sql)}
  where id in (select id from threads
               where id in (${threadIds}) and last_activity_at < now() - ${POSTS_MOVE_AFTER}::interval
               order by id for no key update)`;
