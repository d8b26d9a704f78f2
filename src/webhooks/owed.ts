import type { Sql } from '../db/connect';

// A delivery `d` (recipient `a`, thread `t`) still owes a doorbell while it was accepted for a
// webhook, has not moved on or been acknowledged, and its agent still has a webhook and is not
// archived. A job that finds otherwise ends without sending, and the re-publish sweep skips it.
export const owesDoorbell = (sql: Sql) => sql`
  d.webhook and d.step = 'accepted' and d.acknowledged_at is null
  and a.webhook_url is not null and a.archived_at is null and t.state <> 'closed'`;
