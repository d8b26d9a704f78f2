import type { Sql } from '../db/connect';
import type { Actor } from './agents';
import { invalid, notFound } from './errors';
import { announceNewDeliveries, wakeWithJobs } from './announce';
import { addNotifyJobs } from './notify-jobs';
import { isId } from './ids';
import { LIMITS, NewMessage, type MessageRecord, type PostedMessage } from './schemas';
import { validate } from './validate';
import { agentSeesThread } from './visibility';

const threadNotFound = () => notFound('No such thread, or you are not a participant.');
const messageNotFound = () => notFound('No such message, or you are not a participant of its thread.');

// A message and one delivery per active participant other than the sender, plus the doorbell job
// of every recipient with a webhook, in one statement: all of it commits together or none of it
// does, and there is no moment at which a committed delivery has no queued notification. The
// wake-ups of waiting inboxes and dashboards follow the commit, unless a doorbell job already
// makes this transaction notify (see announce.ts).
export async function postMessage(sql: Sql, actor: Actor, threadId: string, input: unknown): Promise<PostedMessage> {
  const body = validate(NewMessage, input);
  const summary = body.summary?.trim() ? body.summary : null;
  if (body.content.length > LIMITS.summaryRequiredAbove && summary === null) {
    throw invalid(
      `summary is required when content is longer than ${LIMITS.summaryRequiredAbove} characters; add one and resend`,
    );
  }
  if (!isId(threadId)) throw threadNotFound();
  const senderAgentId = actor.kind === 'agent' ? actor.id : null;
  const [row] = await sql<
    {
      state: string | null;
      member: boolean;
      id: string | null;
      createdAt: Date | null;
      recipients: number;
      woken: number;
      deliveryIds: string[];
      recipientIds: string[];
    }[]
  >`
    with thread as (
      select t.id, t.state,
             ${senderAgentId}::uuid is null or exists (
               select 1 from participants p where p.thread_id = t.id and p.agent_id = ${senderAgentId}
             ) as member
      from threads t where t.id = ${threadId}
    ), recipients as (
      select a.id, a.webhook_url is not null as webhook
      from participants p join agents a on a.id = p.agent_id
      where p.thread_id = ${threadId} and a.archived_at is null and a.id is distinct from ${senderAgentId}::uuid
    ), message as (
      insert into messages (thread_id, sender_agent_id, sender, content, summary)
      select thread.id, ${senderAgentId}, ${actor.username}, ${body.content}, ${summary}
      from thread
      where thread.member and thread.state = 'open' and exists (select 1 from recipients)
      returning id, thread_id, created_at
    ), delivery as (
      insert into deliveries (message_id, thread_id, recipient_id, webhook, publish_attempts)
      select message.id, message.thread_id, r.id, r.webhook, case when r.webhook then 1 else 0 end
      from message cross join recipients r
      returning id, recipient_id, webhook
    ), job as (${addNotifyJobs(sql, 'delivery')}
    ), wake as (${wakeWithJobs(sql, 'delivery')})
    -- job and wake are plain SELECTs, which PostgreSQL runs only when referenced: hence the counts.
    select thread.state, coalesce(thread.member, false) as member, message.id, message.created_at as "createdAt",
           (select count(*)::int from delivery) as recipients, (select count(*)::int from job) as jobs,
           (select count(*)::int from wake) as woken,
           (select coalesce(array_agg(id), '{}') from delivery) as "deliveryIds",
           (select coalesce(array_agg(recipient_id), '{}') from delivery) as "recipientIds"
    from (select 1) as one
    left join thread on true
    left join message on true`;
  if (!row?.state || !row.member || (actor.kind === 'agent' && row.state === 'closed')) throw threadNotFound();
  if (row.state === 'close-pending') {
    throw invalid('The thread is closing: a close was requested and awaits a person, so sending is rejected.');
  }
  if (row.state === 'closed') throw invalid('The thread is closed.');
  if (!row.id) {
    throw invalid('Every other participant is archived, so the message would reach nobody; nothing was sent.');
  }
  if (row.woken === 0) announceNewDeliveries(sql, row.deliveryIds, row.recipientIds);
  return { id: row.id, threadId, createdAt: row.createdAt!.toISOString(), recipients: row.recipients };
}

const toMessage = (r: Record<string, unknown>): MessageRecord => ({
  id: r.id as string,
  threadId: r.threadId as string,
  sender: r.sender as string,
  content: r.content as string,
  summary: r.summary as string | null,
  createdAt: (r.createdAt as Date).toISOString(),
});

// Reading moves a delivery to Fetched whatever step it had reached (a failed doorbell included:
// the agent has the message now) and keeps the first read's time.
const markFetched = (sql: Sql) => sql`
  step = 'fetched', failed_step = null, fetched_at = coalesce(fetched_at, now())`;

// The newest `limit` messages, oldest first, with bodies. Records a read of every message
// returned, so the per-message read record of the thread is lost (the contract's warning).
export async function listMessages(sql: Sql, actor: Actor, threadId: string, limit: number): Promise<MessageRecord[]> {
  if (!isId(threadId)) throw threadNotFound();
  const rows = await sql`
    with visible as (
      select 1 where ${agentSeesThread(sql, sql`${threadId}::uuid`, actor.id)}
    ), page as (
      select m.id, m.thread_id as "threadId", m.sender, m.content, m.summary, m.created_at as "createdAt"
      from messages m
      where m.thread_id = ${threadId} and exists (select 1 from visible)
      order by m.id desc limit ${limit}
    ), fetched as (
      update deliveries set ${markFetched(sql)}
      where recipient_id = ${actor.id} and message_id in (select id from page) and step <> 'fetched'
    )
    select exists (select 1 from visible) as visible, page.*
    from (select 1) as one left join page on true
    order by page.id`;
  if (!rows[0]?.visible) throw threadNotFound();
  return rows.filter((r) => r.id !== null).map(toMessage);
}

// One message by id, recording only that read (the preferred way for an agent to read).
export async function readMessage(sql: Sql, actor: Actor, messageId: string): Promise<MessageRecord> {
  if (!isId(messageId)) throw messageNotFound();
  const [row] = await sql`
    with message as (
      select m.id, m.thread_id as "threadId", m.sender, m.content, m.summary, m.created_at as "createdAt"
      from messages m
      where m.id = ${messageId} and ${agentSeesThread(sql, sql`m.thread_id`, actor.id)}
    ), fetched as (
      update deliveries set ${markFetched(sql)}
      where recipient_id = ${actor.id} and message_id in (select id from message) and step <> 'fetched'
    )
    select * from message`;
  if (!row) throw messageNotFound();
  return toMessage(row);
}
