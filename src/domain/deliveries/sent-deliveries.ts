import type { PendingQuery, Row } from 'postgres';
import type { Queries, Sql } from '../../db/connect';
import type { InboxSignal } from '../../db/inbox-signal';
import { asActor, type Agent } from '../agents/actors';
import { invalid, notFound } from '../shared/errors';
import { isId } from '../shared/ids';
import { keyBounds, pageOf, type PageQuery } from '../shared/keyset';
import { readMessage, toMessage } from '../messages/messages';
import { filesOf } from '../files/files';
import type { FileRecord } from '../shared/schemas';
import type { DeliveryStep, MessageRecord, RecipientStatus } from '../shared/schemas';
import { agentSeesThread } from '../threads/visibility';
import { settlesWithin } from '../../settles-within';
import { receiptColumns, recipientStatus, type ReceiptColumns } from './receipts';

// The deliveries of an agent's messages to one other agent, seen from the sending side (the A2A
// door's tasks): the message, the recipient's step, and whether the recipient has answered, that
// is, written in the thread since. Only the sender sees them, as with receipts; and only while it
// sees the thread does it learn of an answer, since what is written there is otherwise none of
// its business (visibility.ts).
export type SentDelivery = {
  id: string;
  message: MessageRecord;
  // The id the sender gave the message, when it sent it over A2A (postToAgent).
  a2aMessageId: string | null;
  status: RecipientStatus;
  // The recipient's first message in the thread after this one. `message` is null where it was
  // not read (a listing).
  answer: { id: string; createdAt: string; message: MessageRecord | null } | null;
};

// A listing's filters: the same conditions the door's states are made of.
export type SentFilter = { threadId?: string | null; steps?: DeliveryStep[] | null; answered?: boolean | null };

export const noSuchDelivery = () => notFound('No such delivery of a message you sent.');

// A delivery `d` of a message `m` the sender sent, to `recipient`: all that the sender may see of
// sent deliveries, and only one recipient's at an address.
export const sentTo = (sql: Queries, sender: Agent, recipient: Agent) => sql`
  d.recipient_id = ${recipient.id} and m.sender_agent_id = ${sender.id}`;

type SentRow = ReceiptColumns & {
  id: string;
  message_id: string;
  thread_id: string;
  sender: string;
  content: string;
  summary: string | null;
  sent_at: Date;
  answer_id: string | null;
  answered_at: Date | null;
  a2a_message_id: string | null;
  files: FileRecord[];
};

const selectSent = (sql: Queries, sender: Agent, recipient: Agent, also: PendingQuery<Row[]>) => sql`
  select d.id, d.message_id, d.thread_id, m.sender, m.content, m.summary, m.created_at as sent_at,
         answer.id as answer_id, answer.created_at as answered_at, a2a.a2a_message_id, ${filesOf(sql, sql`d.message_id`)} as files,
         ${receiptColumns(sql)}
  from deliveries d
  join messages m on m.id = d.message_id
  left join a2a_message_ids a2a on a2a.message_id = d.message_id
  left join lateral (
    select r.id, r.created_at from messages r
    where r.thread_id = d.thread_id and r.id > d.message_id and r.sender_agent_id = d.recipient_id
      and ${agentSeesThread(sql, sql`d.thread_id`, sender.id)}
    order by r.id limit 1
  ) answer on true
  where ${sentTo(sql, sender, recipient)} ${also}`;

const toSent = (r: SentRow, stalledAfterMs: number): SentDelivery => ({
  id: r.id,
  message: toMessage({ id: r.message_id, threadId: r.thread_id, sender: r.sender, content: r.content, summary: r.summary, createdAt: r.sent_at, files: r.files }),
  a2aMessageId: r.a2a_message_id,
  status: recipientStatus(r, stalledAfterMs),
  answer: r.answer_id ? { id: r.answer_id, createdAt: r.answered_at!.toISOString(), message: null } : null,
});

// One delivery of the sender's message to `recipient`. With `readAnswer`, the answer is read as
// read_message reads it, recording that read.
export async function sentDelivery(
  sql: Sql,
  sender: Agent,
  recipient: Agent,
  deliveryId: string,
  options: { stalledAfterMs: number; readAnswer: boolean },
): Promise<SentDelivery> {
  if (!isId(deliveryId)) throw noSuchDelivery();
  const [row] = await sql<SentRow[]>`${selectSent(sql, sender, recipient, sql`and d.id = ${deliveryId}`)}`;
  if (!row) throw noSuchDelivery();
  const sent = toSent(row, options.stalledAfterMs);
  if (sent.answer && options.readAnswer) sent.answer.message = await readMessage(sql, asActor(sender), sent.answer.id);
  return sent;
}

// A page of them, newest first, and how many match in all. Answers are named, not read.
export async function sentDeliveries(
  sql: Sql,
  sender: Agent,
  recipient: Agent,
  filter: SentFilter,
  page: PageQuery,
  stalledAfterMs: number,
): Promise<{ items: SentDelivery[]; total: number; next: string | null }> {
  if (page.after && !isId(page.after)) throw invalid('after must be an id taken from the list');
  if (filter.threadId && !isId(filter.threadId)) return { items: [], total: 0, next: null };
  const matching = sql`
    ${filter.threadId ? sql`and d.thread_id = ${filter.threadId}` : sql``}
    ${filter.steps ? sql`and d.step = any(${filter.steps}::delivery_step[])` : sql``}
    ${filter.answered === null || filter.answered === undefined ? sql`` : sql`and (answer.id is not null) = ${filter.answered}`}`;
  const [rows, [count]] = await Promise.all([
    sql<SentRow[]>`
      ${selectSent(sql, sender, recipient, sql`${matching} ${keyBounds(sql, sql`d.id`, page)}`)}
      order by d.id desc limit ${page.limit + 1}`,
    sql<{ total: number }[]>`select count(*)::int as total from (${selectSent(sql, sender, recipient, matching)}) matching`,
  ]);
  const { items, next } = pageOf(rows, page.limit, (r) => r.id);
  return { items: items.map((r) => toSent(r, stalledAfterMs)), total: count!.total, next };
}

// A followed delivery is read again at least this often, woken or not: its "stalled" flag turns
// with time alone, and a notification can be lost while the listener reconnects.
const FOLLOW_RECHECK_MS = 30_000;

// Follows one delivery of the sender's message: yields it as it is, then again whenever it has
// changed (its step, or the recipient's answer, which arrives as a new delivery to the sender),
// until the consumer stops asking, `abort` fires or the process stops. The wake-ups are registered
// before each read, so a change committed after a read's snapshot still wakes the next one.
// `changed` is called when what the sender's credential answers for may have changed (archived,
// another key): the door decides whether its stream may go on.
export async function* followSentDelivery(
  sql: Sql,
  signal: InboxSignal,
  sender: Agent,
  recipient: Agent,
  deliveryId: string,
  options: { stalledAfterMs: number; abort: AbortSignal; changed: () => void },
): AsyncGenerator<SentDelivery, void, undefined> {
  let woken = Promise.withResolvers<void>();
  const wake = () => woken.resolve();
  const undo = [
    signal.watchDeliveries([deliveryId], wake),
    signal.subscribeEvents(sender.id, wake, options.changed, { receipts: false }),
  ];
  try {
    if (undo.includes(null)) return;
    let last = '';
    for (;;) {
      woken = Promise.withResolvers<void>();
      const sent = await sentDelivery(sql, sender, recipient, deliveryId, { stalledAfterMs: options.stalledAfterMs, readAnswer: true });
      const seen = JSON.stringify([sent.status, sent.answer?.id ?? null]);
      if (seen !== last) {
        last = seen;
        yield sent;
      }
      if (signal.stopped() || options.abort.aborted) return;
      await settlesWithin(woken.promise, FOLLOW_RECHECK_MS, options.abort);
      if (options.abort.aborted || signal.stopped()) return;
    }
  } finally {
    for (const u of undo) u?.();
  }
}
