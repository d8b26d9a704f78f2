import type { Sql } from '../../db/connect';
import type { Agent } from '../agents/actors';
import { notFound } from '../shared/errors';
import { isId } from '../shared/ids';
import { isoFromText } from '../shared/iso-time';
import { toDelivered } from './delivery-steps';
import type { FileRecord, InboxEntry } from '../shared/schemas';
import { filesOf } from '../files/files';
import { inboxSummary } from '../messages/summary-line';
import { agentSeesThread, titleOfThreadSeen } from '../threads/visibility';

const deliveryNotFound = () => notFound('No such delivery, or it is not addressed to you.');

// Everything accepted for the agent and not acknowledged, oldest first, leaving out closed
// threads and threads the agent has been removed from. Exactly `limit` rows means there may be more.
//
// The page is read off the partial inbox index (recipient_id, id) whatever the backlog. Written
// as `recipient_id = …` and `order by id`, the planner may walk deliveries_pkey instead and
// filter, which for an agent owning most rows looks as cheap but reads past every older delivery
// of every other agent first (a million-row backlog paid ~10 x a thousand-row one). A range on
// recipient_id is not folded into a constant, so `order by recipient_id, id` stays an ordering
// only the inbox index provides, and the walk stops at the page's last row.
// The visibility test is a lateral subquery behind OFFSET 0, which is never flattened into a join:
// as a join, the planner may start from the agent's visible threads and walk each on (thread_id,
// id), which for one thread holding a large backlog reads all of it and sorts
// (test/inbox-plan.test.ts). Lateral, it runs once per thread of the page, not once per row (a
// Memoize on the thread), and gives the title without joining threads again.
// Everything else the page shows is on the delivery itself (sql/036), and the statement reads
// nothing else: every step a plan has is set up at every execution, run or not, so what only some
// pages need is a second statement that only those pages send (`messageParts`).
// Every value the caller gives is read through a sub-select, so the planner never sees it: the
// plan does not depend on whose inbox it is, PostgreSQL's plan cache keeps one generic plan per
// connection instead of planning the statement afresh at every read (planning was half the page's
// PostgreSQL CPU; docs/internals/performance.md). The limit (a whole number from listLimit) is
// written into the statement for the same reason.
// With `after` (a deliveryId), only entries accepted after that one: a client that has seen the
// inbox up to there waits for new mail instead of being answered at once with what it has seen.
// Rows come as arrays (`values()`): nine values a row are decoded, not named on an object first.
type PageRow = [
  deliveryId: string,
  messageId: string,
  threadId: string,
  thread: string,
  sender: string | null,
  summary: string | null,
  receivedAt: string,
  alreadyRead: boolean,
  carriesFiles: boolean | null,
];

export async function inbox(sql: Sql, agent: Agent, limit: number, after?: string): Promise<InboxEntry[]> {
  const me = sql`(select ${agent.id}::uuid)`;
  const rows = (await sql`
    select d.id as "deliveryId", d.message_id as "messageId", d.thread_id as "threadId", t.title as thread, d.sender, d.summary,
           d.created_at::text as "receivedAt", d.fetched_at is not null as "alreadyRead", d.carries_files as "carriesFiles"
    from deliveries d
    join lateral (${titleOfThreadSeen(sql, sql`d.thread_id`, sql`d.recipient_id`)} offset 0) t on true
    where d.recipient_id between ${me} and ${me} and d.acknowledged_at is null
      ${after === undefined ? sql`` : sql`and d.id > (select ${after}::uuid)`}
    order by d.recipient_id, d.id
    limit ${sql.unsafe(String(Math.trunc(limit)))}`.values()) as unknown as PageRow[];
  const parts = await messageParts(sql, rows);
  const entries: InboxEntry[] = [];
  for (const [deliveryId, messageId, threadId, thread, sender, summary, receivedAt, alreadyRead, carriesFiles] of rows) {
    const part = parts?.get(messageId);
    // A message deleted (retention) between the two statements takes its deliveries with it.
    if (summary === null && !part) continue;
    entries.push({
      deliveryId,
      messageId,
      threadId,
      thread,
      sender: sender ?? part!.sender,
      summary: summary ?? inboxSummary(part!.summary, part!.content!),
      receivedAt: isoFromText(receivedAt),
      alreadyRead,
      files: carriesFiles === false ? [] : (part?.files ?? []),
    });
  }
  return entries;
}

// What a page's deliveries do not carry themselves, for those that need it, in one statement: the
// files of a message that carries some (or, written before sql/036, may), and the sender and
// summary (or, without one, the body) of a delivery written before sql/036, or by the release
// before it while both run. Null when no delivery of the page needs anything.
type MessagePart = { id: string; sender: string; summary: string | null; content: string | null; files: FileRecord[] };
async function messageParts(sql: Sql, rows: PageRow[]): Promise<Map<string, MessagePart> | null> {
  const ids = rows.filter((r) => r[5] === null || r[8] !== false).map((r) => r[1]);
  if (ids.length === 0) return null;
  const parts = await sql<MessagePart[]>`
    select m.id, m.sender, m.summary, case when m.summary is null then m.content end as content, ${filesOf(sql, sql`m.id`)} as files
    from messages m where m.id = any(${ids}::uuid[])`;
  return new Map(parts.map((part) => [part.id, part]));
}

// A delivery is visible to its recipient while the recipient is still in the thread and the
// thread is not closed; otherwise it does not exist for the caller.
const visibleDelivery = (sql: Sql, agent: Agent) => sql`
  d.recipient_id = ${agent.id} and ${agentSeesThread(sql, sql`d.thread_id`, agent.id)}`;

// The handler's report that the doorbell reached it. Idempotent: the first report's time is kept
// and a repeat writes nothing.
export async function reportDelivered(sql: Sql, agent: Agent, deliveryId: string) {
  if (!isId(deliveryId)) throw deliveryNotFound();
  // The "first report only" test is on the row itself, so that of two concurrent reports the one
  // that waited for the other's lock finds the time already set instead of overwriting it.
  const [reported] = await sql<{ delivered_at: Date }[]>`
    update deliveries d set ${toDelivered(sql)}
    where d.id = ${deliveryId} and d.delivered_at is null and ${visibleDelivery(sql, agent)}
    returning d.delivered_at`;
  const [row] = reported
    ? [reported]
    : await sql<{ delivered_at: Date | null }[]>`select d.delivered_at from deliveries d where d.id = ${deliveryId} and ${visibleDelivery(sql, agent)}`;
  if (!row) throw deliveryNotFound();
  // A visible delivery the update passed over had been reported already, so its time is set.
  return { message: 'Delivery reported as delivered.', deliveredAt: row.delivered_at!.toISOString() };
}

// Takes the delivery out of the inbox; its step is left as it is. Idempotent: the first time is kept.
// The copy of the message's sender and summary the inbox read goes with it (sql/036).
export async function acknowledge(sql: Sql, agent: Agent, deliveryId: string) {
  if (!isId(deliveryId)) throw deliveryNotFound();
  const [acked] = await sql<{ id: string }[]>`
    update deliveries d set acknowledged_at = now(), sender = null, summary = null
    where d.id = ${deliveryId} and d.acknowledged_at is null and ${visibleDelivery(sql, agent)}
    returning d.id`;
  const [row] = acked
    ? [acked]
    : await sql<{ id: string }[]>`select d.id from deliveries d where d.id = ${deliveryId} and ${visibleDelivery(sql, agent)}`;
  if (!row) throw deliveryNotFound();
  return { message: 'Delivery acknowledged.' };
}

// The MCP form: acknowledge by message id, for the caller's own delivery of that message.
export async function acknowledgeMessage(sql: Sql, agent: Agent, messageId: string) {
  if (!isId(messageId)) throw notFound('No such message delivered to you.');
  const [row] = await sql<{ id: string }[]>`
    select d.id from deliveries d where d.message_id = ${messageId} and ${visibleDelivery(sql, agent)}`;
  if (!row) throw notFound('No such message delivered to you.');
  return acknowledge(sql, agent, row.id);
}
