import type { PendingQuery, Row } from 'postgres';
import type { Sql } from '../db/connect';

// An agent sees a thread, and everything in it, while it participates and the thread is not
// closed; to the agent anything else does not exist (404, never 403, so a stranger learns nothing).
// The one SQL form of that rule, for a thread and an agent given as columns or values.
export const agentSeesThread = (sql: Sql, thread: PendingQuery<Row[]>, agentId: string | PendingQuery<Row[]>) => sql`
  exists (select 1 from threads vt join participants vp on vp.thread_id = vt.id
          where vt.id = ${thread} and vt.state <> 'closed' and vp.agent_id = ${agentId})`;
