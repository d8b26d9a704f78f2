import type { PendingQuery, Row } from 'postgres';
import type { Queries } from '../../db/connect';
import { notFound } from '../shared/errors';

// An agent sees a thread, and everything in it, while it participates and the thread is not
// closed; to the agent anything else does not exist (404, never 403, so a stranger learns nothing).
// What an agent is told of a thread it does not see, whether or not it exists.
export const NO_SUCH_THREAD = 'No such thread, or you are not a participant.';
export const threadNotFound = () => notFound(NO_SUCH_THREAD);

// The rule in SQL, over a thread `vt` joined with its participants `vp`; the forms below apply it.
const seenBy = (sql: Queries, agentId: string | PendingQuery<Row[]>) => sql`vt.state <> 'closed' and vp.agent_id = ${agentId}`;

// For a thread and an agent given as columns or values.
export const agentSeesThread = (sql: Queries, thread: PendingQuery<Row[]>, agentId: string | PendingQuery<Row[]>) => sql`
  exists (select 1 from threads vt join participants vp on vp.thread_id = vt.id
          where vt.id = ${thread} and ${seenBy(sql, agentId)})`;

// The thread's title, one row or none: the same rule as a lateral subquery, for a walk that both
// tests each row's thread and shows its title.
export const titleOfThreadSeen = (sql: Queries, thread: PendingQuery<Row[]>, agentId: string | PendingQuery<Row[]>) => sql`
  select vt.title from threads vt join participants vp on vp.thread_id = vt.id
  where vt.id = ${thread} and ${seenBy(sql, agentId)}`;

// Every thread the agent sees, as a set of ids: for a search that starts from the agent's threads
// (an index on thread_id) rather than testing each row it finds.
export const threadsAgentSees = (sql: Queries, agentId: string) => sql`
  select vt.id from threads vt join participants vp on vp.thread_id = vt.id where ${seenBy(sql, agentId)}`;

// The same rule for an agent about to change the thread: the rows that make it true are locked
// until the transaction ends, so that the thread cannot close, nor the agent be removed, before
// the change commits (a close or a removal waits for it). One committed first is seen, since a
// locked row is read again at its newest version.
export const agentHoldsThread = (tx: Queries, threadId: string, agentId: string) => tx<{ held: number }[]>`
  select 1 as held from threads vt join participants vp on vp.thread_id = vt.id
  where vt.id = ${threadId} and ${seenBy(tx, agentId)}
  for share`;
