import type { Sql } from '../../db/connect';
import { deleteDeadJobs } from '../../db/job-queue';
import { removeExpiredEvents } from '../deliveries/agent-events';
import { pruneDecisions } from '../people/audit';

// What history is kept, and for how long. The attempt log, dead queue jobs and the audit trail are
// pruned by default; messages (with their deliveries and attempts) only when an operator sets a period.
export type Retention = { attemptLogDays: number; deadJobDays: number; messageDays: number | null; eventHours: number; auditDays: number };
export type Pruned = {
  attempts: number;
  deadJobs: number;
  messages: number;
  oauthArtifacts: number;
  endpointHistory: number;
  agentEvents: number;
  auditEvents: number;
};

const BATCH = 5_000;
const daysAgo = (days: number) => new Date(Date.now() - days * 86_400_000);

// Deletes in batches, oldest first, each batch its own short statement: pruning a month's backlog
// never holds locks or a transaction for long, and each batch walks its table's key from the start.
async function inBatches(remove: () => Promise<number>): Promise<number> {
  let total = 0;
  for (;;) {
    const removed = await remove();
    total += removed;
    if (removed < BATCH) return total;
  }
}

export async function pruneHistory(sql: Sql, retention: Retention): Promise<Pruned> {
  const attemptCutoff = daysAgo(retention.attemptLogDays);
  const attempts = await inBatches(async () => {
    const rows = await sql<{ deleted: number }[]>`
      delete from delivery_attempts where id in (
        select id from delivery_attempts where attempted_at < ${attemptCutoff} order by id limit ${BATCH})
      returning 1 as deleted`;
    return rows.length;
  });
  const deadJobs = await inBatches(() => deleteDeadJobs(sql, daysAgo(retention.deadJobDays), BATCH));
  let messages = 0;
  if (retention.messageDays !== null) {
    const messageCutoff = daysAgo(retention.messageDays);
    // Deliveries and their attempts go with their message (on delete cascade). Rows are locked in
    // id order, the order the search index's catching up holds them in (message-search.ts), so
    // that the two wait for each other instead of deadlocking.
    messages = await inBatches(async () => {
      const rows = await sql<{ deleted: number }[]>`
        delete from messages where id in (
          select id from messages where created_at < ${messageCutoff} order by id limit ${BATCH} for update)
        returning 1 as deleted`;
      return rows.length;
    });
  }
  // Expired OAuth codes, tokens and interactions are already refused by their expiry; this frees
  // their rows.
  const oauthArtifacts = await inBatches(async () => {
    const rows = await sql<{ deleted: number }[]>`
      delete from oauth_artifacts where (model, id_hash) in (
        select model, id_hash from oauth_artifacts where expires_at < now() limit ${BATCH})
      returning 1 as deleted`;
    return rows.length;
  });
  // Endpoint health reads a day of windows (agents/endpoint-health.ts); test events are kept as
  // long as the attempt log.
  const endpointHistory = await inBatches(async () => {
    const rows = await sql<{ deleted: number }[]>`
      with windows as (
        delete from endpoint_attempt_windows where (agent_id, window_start) in (
          select agent_id, window_start from endpoint_attempt_windows
          where window_start < now() - interval '2 days' limit ${BATCH})
        returning 1 as deleted
      ), tests as (
        delete from endpoint_test_events where id in (
          select id from endpoint_test_events where requested_at < ${attemptCutoff} and attempted_at is not null
          order by id limit ${BATCH})
        returning 1 as deleted
      )
      select * from windows union all select * from tests`;
    return rows.length;
  });
  const agentEvents = await inBatches(() => removeExpiredEvents(sql, retention.eventHours, BATCH));
  const auditEvents = await inBatches(() => pruneDecisions(sql, retention.auditDays, BATCH));
  return { attempts, deadJobs, messages, oauthArtifacts, endpointHistory, agentEvents, auditEvents };
}
