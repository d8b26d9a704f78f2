import type { Queries, Sql } from '../../db/connect';
import type { Logger } from '../../log';
import { ringWindowFor } from '../deliveries/doorbells-at-once';
import { recordDecisions, type Decider, deciderName } from '../people/audit';
import { invalid, notFound } from '../shared/errors';
import { isId } from '../shared/ids';
import { pageOf, pageQuery } from '../shared/keyset';
import { LIMITS, type Page } from '../shared/schemas';
import { afterCommit, insertPosts, type HoldReason, type PostOutcome } from './messages';
import { sendRulesFor } from './send-rules';
import { oneLine } from './summary-line';

// Messages that wait for a person's yes (sql/025_governance.sql held_messages). A post writes them
// (messages.ts); people approve or reject them here; the sweep rejects those left undecided.

export type HoldState = 'held' | 'approved' | 'rejected';

// What the sender is told of its message's hold (its receipts, MCP message_status, the A2A task).
export type HoldStatus = {
  state: HoldState;
  reason: HoldReason;
  expiresAt: string;
  decidedAt: string | null;
  decidedBy: string | null;
  rejectionReason: string | null;
};

export type HoldRowJson = {
  state: HoldState;
  reason: HoldReason;
  decided_by_name: string | null;
  rejection_reason: string | null;
};
type HoldRow = {
  state: HoldState;
  reason: HoldReason;
  expires_at: Date;
  decided_at: Date | null;
  decided_by_name: string | null;
  rejection_reason: string | null;
};

export const holdStatus = (r: HoldRow): HoldStatus => ({
  state: r.state,
  reason: r.reason,
  expiresAt: r.expires_at.toISOString(),
  decidedAt: r.decided_at?.toISOString() ?? null,
  decidedBy: r.decided_by_name,
  rejectionReason: r.rejection_reason,
});

// The hold of a message `senderId` sent, if it was ever held; a look-up by primary key.
export async function holdOf(sql: Queries, senderId: string, messageId: string): Promise<(HoldStatus & { threadId: string }) | null> {
  if (!isId(messageId)) return null;
  const [row] = await sql<(HoldRow & { thread_id: string })[]>`
    select state, reason, expires_at, decided_at, decided_by_name, rejection_reason, thread_id
    from held_messages where id = ${messageId} and sender_agent_id = ${senderId}`;
  return row ? { ...holdStatus(row), threadId: row.thread_id } : null;
}

// A message waiting for people, as the "Waiting for you" list shows it: who sent what to whom, why
// it waits, and the last few messages of its thread for context.
export type WaitingMessage = {
  id: string;
  threadId: string;
  threadTitle: string;
  sender: string;
  recipients: string[];
  summary: string | null;
  content: string;
  reason: HoldReason;
  createdAt: string;
  expiresAt: string;
  context: { sender: string; line: string; createdAt: string }[];
};

const CONTEXT_MESSAGES = 3;

// Waiting messages, the oldest first (the first to expire), at most `limit`, after the id `after`;
// only those of `sender` when given.
export async function waitingMessages(
  sql: Sql,
  page: { limit: number; after: string | null; sender?: string | null; threadId?: string | null },
): Promise<WaitingMessage[]> {
  if (page.after !== null && !isId(page.after)) throw invalid('after must be the id of a waiting message from the list', 'after');
  if (page.threadId && !isId(page.threadId)) throw invalid('threadId must be a thread id', 'threadId');
  const rows = await sql<(Omit<WaitingMessage, 'createdAt' | 'expiresAt'> & { createdAt: Date; expiresAt: Date })[]>`
    select h.id, h.thread_id as "threadId", t.title as "threadTitle", h.sender, h.summary, h.content, h.reason,
           h.created_at as "createdAt", h.expires_at as "expiresAt",
           coalesce((select array_agg(a.username order by a.username) from participants p join agents a on a.id = p.agent_id
                     where p.thread_id = h.thread_id and a.archived_at is null and a.id <> h.sender_agent_id), '{}') as recipients,
           coalesce((select json_agg(json_build_object('sender', c.sender, 'line', coalesce(c.summary, left(c.content, ${LIMITS.webhookSummary})),
                                                       'createdAt', c.created_at) order by c.id)
                     from (select m.id, m.sender, m.summary, m.content, m.created_at from messages m
                           where m.thread_id = h.thread_id and m.id < h.id order by m.id desc limit ${CONTEXT_MESSAGES}) c), '[]') as context
    from held_messages h join threads t on t.id = h.thread_id
    where h.state = 'held'
      ${page.after ? sql`and h.id > ${page.after}` : sql``}
      ${page.sender ? sql`and h.sender = ${page.sender}` : sql``}
      ${page.threadId ? sql`and h.thread_id = ${page.threadId}` : sql``}
    order by h.id
    limit ${page.limit}`;
  return rows.map((r) => ({
    ...r,
    context: r.context.map((c) => ({ ...c, line: oneLine(null, c.line, LIMITS.webhookSummary), createdAt: new Date(c.createdAt).toISOString() })),
    createdAt: r.createdAt.toISOString(),
    expiresAt: r.expiresAt.toISOString(),
  }));
}

// A page of the "Waiting for you" list from a request's query: `after` (the `next` of the previous
// page), `limit`, and the filters `sender` and `threadId`.
export async function waitingPage(sql: Sql, query: Record<string, unknown>): Promise<Page<WaitingMessage>> {
  const { after, limit } = pageQuery(query);
  const text = (name: string) => (typeof query[name] === 'string' && query[name] !== '' ? (query[name] as string) : null);
  const rows = await waitingMessages(sql, { after, limit: limit + 1, sender: text('sender'), threadId: text('threadId') });
  return pageOf(rows, limit, (m) => m.id);
}

// How many wait, and since when: the Overview's card, the badge and the metric.
export async function waitingCount(sql: Sql): Promise<{ waiting: number; oldestAt: string | null }> {
  const [row] = await sql<{ waiting: number; oldest: Date | null }[]>`
    select count(*)::int as waiting, min(created_at) as oldest from held_messages where state = 'held'`;
  return { waiting: row!.waiting, oldestAt: row!.oldest?.toISOString() ?? null };
}

// The figures the metrics read at each scrape, in one statement: how many wait, how long the
// oldest has, and how many threads the loop breaker paused.
export async function holdFigures(sql: Sql): Promise<{ waiting: number; oldestAgeSeconds: number; pausedThreads: number }> {
  const [row] = await sql<{ waiting: number; oldestAgeSeconds: number; pausedThreads: number }[]>`
    select count(*)::int as waiting, coalesce(extract(epoch from now() - min(created_at)), 0)::float8 as "oldestAgeSeconds",
           (select count(*) from threads where paused_at is not null)::int as "pausedThreads"
    from held_messages where state = 'held'`;
  return row!;
}

export type Decided = { approved: string[]; rejected: { id: string; reason: string }[] };

// At most this many messages are decided in one transaction: approving them writes them all in
// one statement, as a burst of posts does.
export const DECIDE_AT_ONCE = 1_000;

const checkIds = (ids: unknown): string[] => {
  if (!Array.isArray(ids) || ids.length === 0 || ids.length > DECIDE_AT_ONCE || !ids.every((id) => typeof id === 'string' && isId(id))) {
    throw invalid(`messageIds must be 1 to ${DECIDE_AT_ONCE} ids of waiting messages`, 'messageIds');
  }
  return [...new Set(ids as string[])];
};

const whyUnwritten = (o: PostOutcome) =>
  !o.state || o.state === 'closed'
    ? 'The thread closed while the message waited, so it was not sent.'
    : o.state === 'close-pending'
      ? 'The thread is closing, so the message was not sent.'
      : !o.member
        ? 'Its sender no longer takes part in the thread, so the message was not sent.'
        : 'Every other participant is archived, so the message would reach nobody; it was not sent.';

// A person's yes: each waiting message is written as the post it would have been — the message
// under its id, one delivery per participant, the doorbell jobs — in one transaction with its
// decision, so that no committed delivery lacks its notification. One the thread can no longer
// take (closed, the sender removed, nobody left) is rejected instead, saying why. Messages
// decided meanwhile by someone else are left as they are and not named in the answer.
export async function approveHeld(sql: Sql, log: Logger, decider: Decider, messageIds: unknown): Promise<Decided> {
  const ids = checkIds(messageIds);
  let outcomes: PostOutcome[] = [];
  let threadIds: string[] = [];
  const decided = await sql.begin(async (tx) => {
    const rows = await tx<{ id: string; thread_id: string; sender_agent_id: string; sender: string; content: string; summary: string | null; file_ids: string[] | null }[]>`
      select id, thread_id, sender_agent_id, sender, content, summary, file_ids from held_messages
      where id = any(${ids}::uuid[]) and state = 'held' order by id for update`;
    if (rows.length === 0) return { approved: [], rejected: [] };
    // The files its sender attached, those still kept, locked until the approval commits.
    const kept = new Set(
      (await tx<{ id: string }[]>`select id from files where id = any(${rows.flatMap((r) => r.file_ids ?? [])}::uuid[]) for key share`).map((f) => f.id),
    );
    const ringWindowMs = ringWindowFor(sql);
    threadIds = rows.map((r) => r.thread_id);
    outcomes = await insertPosts(
      tx,
      rows.map((r) => ({
        threadId: r.thread_id,
        senderAgentId: r.sender_agent_id,
        sender: r.sender,
        content: r.content,
        summary: r.summary,
        doorbellSummary: oneLine(r.summary, r.content, LIMITS.webhookSummary),
        ringWindowMs,
        approvedId: r.id,
        fileIds: (r.file_ids ?? []).filter((id) => kept.has(id)),
      })),
      sendRulesFor(sql),
    );
    const approved = rows.filter((_, i) => outcomes[i]!.id !== null).map((r) => r.id);
    const rejected = rows.flatMap((r, i) => (outcomes[i]!.id === null ? [{ id: r.id, reason: whyUnwritten(outcomes[i]!) }] : []));
    await decide(tx, decider, approved.map((id) => ({ id, state: 'approved' as const, reason: null })));
    await decide(tx, decider, rejected.map((r) => ({ id: r.id, state: 'rejected' as const, reason: r.reason })));
    return { approved, rejected };
  });
  // A person's yes: what it lets through does not count towards a loop.
  outcomes.forEach((outcome, i) => outcome.id !== null && afterCommit(sql, log, outcome, threadIds[i]!, false));
  return decided;
}

// A person's no, with the reason the sender is told. Nothing reaches any recipient.
export async function rejectHeld(sql: Sql, decider: Decider, messageIds: unknown, reason: unknown): Promise<Decided> {
  const ids = checkIds(messageIds);
  if (typeof reason !== 'string' || !reason.trim() || reason.length > 500) {
    throw invalid('reason must be 1 to 500 characters: the sender is told it', 'reason');
  }
  return sql.begin(async (tx) => {
    const rows = await tx<{ id: string }[]>`
      select id from held_messages where id = any(${ids}::uuid[]) and state = 'held' order by id for update`;
    await decide(tx, decider, rows.map((r) => ({ id: r.id, state: 'rejected' as const, reason: reason.trim() })));
    return { approved: [], rejected: rows.map((r) => ({ id: r.id, reason: reason.trim() })) };
  });
}

// Approves everything `sender` has waiting, a transaction of at most DECIDE_AT_ONCE at a time.
export async function approveAllFrom(sql: Sql, log: Logger, decider: Decider, sender: unknown): Promise<Decided> {
  if (typeof sender !== 'string' || !sender) throw invalid("sender must be the username of the agent whose waiting messages to approve", 'sender');
  const [agent] = await sql`select 1 from agents where username = ${sender}`;
  if (!agent) throw notFound(`No agent named ${sender}.`);
  const all: Decided = { approved: [], rejected: [] };
  for (;;) {
    const rows = await sql<{ id: string }[]>`
      select id from held_messages where sender = ${sender} and state = 'held' order by id limit ${DECIDE_AT_ONCE}`;
    if (rows.length === 0) return all;
    const decided = await approveHeld(sql, log, decider, rows.map((r) => r.id));
    all.approved.push(...decided.approved);
    all.rejected.push(...decided.rejected);
    if (rows.length < DECIDE_AT_ONCE) return all;
  }
}

// Marks locked waiting messages decided, with the audit entries, in the caller's transaction.
async function decide(tx: Queries, decider: Decider, decisions: { id: string; state: 'approved' | 'rejected'; reason: string | null }[]) {
  if (decisions.length === 0) return;
  await tx`
    update held_messages h set state = d.state, decided_at = now(), rejection_reason = d.reason,
           decided_by = ${decider.kind === 'person' ? decider.person.id : null}, decided_by_name = ${deciderName(decider)}
    from unnest(${decisions.map((d) => d.id)}::uuid[], ${decisions.map((d) => d.state)}::text[], ${decisions.map((d) => d.reason)}::text[])
         as d(id, state, reason)
    where h.id = d.id`;
  await recordDecisions(
    tx,
    decider,
    decisions.map((d) => ({
      action: d.state === 'approved' ? 'message.approve' : 'message.reject',
      subjectType: 'message' as const,
      subject: d.id,
      before: { state: 'held' },
      after: { state: d.state },
      reason: d.reason,
    })),
  );
}

export const expirySentence = (hours: number) => `No person decided within ${hours} hours, so the message was rejected and not sent.`;

// The sweep's part: rejects up to `limit` messages whose hold expired, as the service, and answers
// how many. Rows another transaction is deciding are skipped, not waited for.
export async function expireHolds(sql: Sql, limit: number, holdHours = sendRulesFor(sql).holdHours): Promise<number> {
  return sql.begin(async (tx) => {
    const rows = await tx<{ id: string }[]>`
      select id from held_messages where state = 'held' and expires_at <= now() order by expires_at limit ${limit} for update skip locked`;
    await decide(tx, { kind: 'service' }, rows.map((r) => ({ id: r.id, state: 'rejected' as const, reason: expirySentence(holdHours) })));
    return rows.length;
  });
}

// The delivery to `recipientId` of a held message since approved, if it was written.
export async function approvedDelivery(sql: Sql, messageId: string, recipientId: string): Promise<string | null> {
  const [row] = await sql<{ id: string }[]>`select id from deliveries where message_id = ${messageId} and recipient_id = ${recipientId}`;
  return row?.id ?? null;
}
