import { holdOf, type HoldStatus } from '../messages/holds';
import type { InboxSignal } from '../../db/inbox-signal';
import type { Queries, Sql } from '../../db/connect';
import type { Agent } from '../agents/actors';
import { isRetrying, isStalled } from './delivery-states';
import { invalid, notFound } from '../shared/errors';
import { isId } from '../shared/ids';
import { iso } from '../shared/iso-time';
import { settlesWithin } from '../../settles-within';
import type { DeliveryStep, MessageReceipts, RecipientStatus } from '../shared/schemas';

// What a sender may see of its own message: each recipient's step and when it got there. Nothing
// else: no webhook URL, no error text (it can name the handler's address), no other message.
export type WaitFor = 'delivered' | 'fetched';

const noSuchMessage = () => notFound('No such message sent by you.');

export function waitForStep(raw: unknown): WaitFor | null {
  if (raw === undefined || raw === null || raw === '') return null;
  if (raw === 'delivered' || raw === 'fetched') return raw;
  throw invalid('waitFor must be delivered or fetched');
}

// Every recipient is at the step or past it, or failed (which it will not leave by itself).
const PAST: Record<WaitFor, Set<string>> = {
  delivered: new Set(['delivered', 'fetched', 'failed']),
  fetched: new Set(['fetched', 'failed']),
};
const reached = (recipients: RecipientStatus[], waitFor: WaitFor) => recipients.every((r) => PAST[waitFor].has(r.step));

// What the sender of a message may read of a delivery of it (`d`), and the status that reads as.
// The recipient's name is looked up per delivery rather than joined: past tens of millions of
// deliveries the planner's sampled estimate of deliveries per message grew (10 for 2 or 3 at
// 10 M messages) and it hashed the whole agents table for a message's few rows instead, a cost
// that grew with the table (docs/internals/performance-history.md, "Search and growth").
export const receiptColumns = (sql: Queries) => sql`
  (select a.username from agents a where a.id = d.recipient_id) as username,
  d.step, d.failed_step, d.webhook, d.next_attempt_at, d.created_at,
  d.notified_at, d.delivered_at, d.fetched_at, d.acknowledged_at`;

export type ReceiptColumns = {
  username: string;
  step: DeliveryStep;
  failed_step: DeliveryStep | null;
  webhook: boolean;
  next_attempt_at: Date | null;
  created_at: Date;
  notified_at: Date | null;
  delivered_at: Date | null;
  fetched_at: Date | null;
  acknowledged_at: Date | null;
};
type ReceiptRow = ReceiptColumns & { id: string; thread_id: string };

export const recipientStatus = (r: ReceiptColumns, stalledAfterMs: number): RecipientStatus => ({
  username: r.username,
  step: r.step,
  failedStep: r.failed_step,
  webhook: r.webhook,
  retrying: isRetrying({ step: r.step, nextAttemptAt: r.next_attempt_at }),
  stalled: isStalled({ step: r.step, notifiedAt: r.notified_at, deliveredAt: r.delivered_at }, stalledAfterMs),
  acceptedAt: r.created_at.toISOString(),
  notifiedAt: iso(r.notified_at),
  deliveredAt: iso(r.delivered_at),
  fetchedAt: iso(r.fetched_at),
  acknowledgedAt: iso(r.acknowledged_at),
});

async function read(sql: Sql, agent: Agent, messageId: string, stalledAfterMs: number) {
  if (!isId(messageId)) throw noSuchMessage();
  const rows = await sql<ReceiptRow[]>`
    select d.id, d.thread_id, ${receiptColumns(sql)}
    from messages m
    join deliveries d on d.message_id = m.id
    where m.id = ${messageId} and m.sender_agent_id = ${agent.id}
    order by username`;
  // A message that has no deliveries may be one that waits for a person, or was rejected; one that
  // has them may have waited before it was approved.
  const hold = await holdOf(sql, agent.id, messageId);
  if (rows.length === 0 && !hold) throw noSuchMessage();
  const recipients = rows.map((r) => recipientStatus(r, stalledAfterMs));
  const threadId = rows[0]?.thread_id ?? hold!.threadId;
  return { deliveryIds: rows.map((r) => r.id), threadId, recipients, hold: hold && withoutThread(hold) };
}

// The receipts of a message the agent sent. With `waitFor`, held for up to `seconds` until every
// recipient has reached that step or failed, woken by the deliveries' own change notifications;
// the watch is registered before each read, so a change committed in between still wakes it.
export async function messageReceipts(
  sql: Sql,
  signal: InboxSignal,
  agent: Agent,
  messageId: string,
  options: { waitFor: WaitFor | null; seconds: number; stalledAfterMs: number; abort?: AbortSignal },
): Promise<MessageReceipts> {
  const { waitFor, seconds, stalledAfterMs, abort } = options;
  let status = await read(sql, agent, messageId, stalledAfterMs);
  const answer = (): MessageReceipts => ({
    messageId,
    threadId: status.threadId,
    recipients: status.recipients,
    reached: waitFor ? reached(status.recipients, waitFor) : null,
    ...(status.hold && { hold: status.hold }),
  });
  // A held message has nobody to wait for until a person decides.
  if (!waitFor || seconds <= 0 || status.recipients.length === 0 || reached(status.recipients, waitFor)) return answer();
  const deadline = performance.now() + seconds * 1000;
  for (;;) {
    const woken = Promise.withResolvers<void>();
    const unwatch = signal.watchDeliveries(status.deliveryIds, woken.resolve);
    try {
      status = await read(sql, agent, messageId, stalledAfterMs);
      const remaining = deadline - performance.now();
      if (reached(status.recipients, waitFor) || !unwatch || remaining <= 0 || abort?.aborted) return answer();
      if (!(await settlesWithin(woken.promise, remaining, abort))) {
        status = await read(sql, agent, messageId, stalledAfterMs);
        return answer();
      }
    } finally {
      unwatch?.();
    }
  }
}

const withoutThread = ({ threadId: _, ...hold }: HoldStatus & { threadId: string }): HoldStatus => hold;
