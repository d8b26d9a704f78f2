import { batchedStatement } from '../../db/batcher';
import type { Queries, Sql } from '../../db/connect';
import type { Logger } from '../../log';
import { once, type Idempotency } from './idempotency';
import { asActor, type Actor, type Agent } from '../agents/actors';
import { invalid, notFound, overQuota } from '../shared/errors';
import { wakeForNewDeliveries, wakeWithJobs } from '../deliveries/delivery-wake-ups';
import { inboxSummary, oneLine } from './summary-line';
import { inIdOrder, toFetched } from '../deliveries/delivery-steps';
import { addNotifyJobs, webhookVersion } from '../deliveries/notify-jobs';
import { secretVersion } from '../agents/signing-secrets';
import { ringAfterCommit, ringWindowFor, type CommittedDoorbell } from '../deliveries/doorbells-at-once';
import { webhookActive } from '../agents/endpoint-health';
import { isId } from '../shared/ids';
import { LIMITS, NewMessage, type MessageRecord, type PostedMessage } from '../shared/schemas';
import { codePoints, validate } from '../shared/validate';
import { markActive } from '../threads/activity';
import { agentSeesThread, threadNotFound } from '../threads/visibility';
import { createThread } from '../threads/threads';
import { sendRulesFor } from './send-rules';
import { countTowardsLoop } from '../threads/loop-breaker';
import { attachFiles, filesFingerprint, filesOf, lockForAttaching } from '../files/files';

const messageNotFound = () => notFound('No such message, or you are not a participant of its thread.');

export type NewPost = {
  threadId: string;
  senderAgentId: string | null;
  sender: string;
  content: string;
  summary: string | null;
  // The doorbell's one-line summary, made here so that the job can carry it (notify-jobs.ts).
  doorbellSummary: string;
  // How long its doorbell jobs wait for this process's ringer; null: due at once (notify-jobs.ts).
  ringWindowMs: number | null;
  // A held message a person approved (holds.ts): written under its id, neither held nor counted again.
  approvedId: string | null;
  // The files it carries, checked and locked by the caller's transaction (files.ts lockForAttaching).
  fileIds: string[];
};
// Why a message waits for a person, when it does: its sender is held, its thread is, or the loop
// breaker paused its thread.
export type HoldReason = 'agent' | 'thread' | 'loop';
export type PostOutcome = {
  state: string | null;
  member: boolean;
  id: string | null;
  createdAt: Date | null;
  deliveryIds: string[];
  recipientIds: string[];
  // Whether the statement woke the recipients' waiters itself (see delivery-wake-ups.ts).
  announced: boolean;
  // The doorbell jobs it queued, for the ringer once it has committed.
  doorbells: CommittedDoorbell[];
  // Held instead of sent: why, and until when a person may decide.
  heldReason: HoldReason | null;
  heldUntil: Date | null;
  // Refused by the sender's quota: the seconds until its window ends.
  overQuotaFor: number | null;
};

// A message and one delivery per active participant other than the sender, plus the doorbell job
// of every recipient with a webhook, in one statement: all of it commits together or none of it
// does, and there is no moment at which a committed delivery has no queued notification.
// Concurrent posts share the statement (db/batcher.ts): each post is still whole or absent, and
// under load the database does one statement's fixed work for many posts. The wake-ups of waiting
// inboxes and dashboards follow the commit, unless a doorbell job already makes the statement
// notify (see delivery-wake-ups.ts); a wake-up that fails is reported to `log`. The doorbells go to
// this process's ringer, if it has one, once committed.
export async function postMessage(
  sql: Sql,
  log: Logger,
  actor: Actor,
  threadId: string,
  input: unknown,
  idempotency?: Idempotency,
): Promise<PostedMessage> {
  const { body, into } = draft(actor, input);
  if (!isId(threadId)) throw threadNotFound();
  const post = into(threadId, ringWindowFor(sql));
  if (!idempotency) {
    // A post with files checks and locks them in its own transaction; one without keeps to the
    // shared statement.
    const row =
      post.fileIds.length === 0
        ? await posts(sql, post)
        : await sql.begin(async (tx) => {
            await lockForAttaching(tx, sql, actor.id, post.fileIds);
            return (await insertPosts(tx, [post], sendRulesFor(sql)))[0]!;
          });
    afterCommit(sql, log, row, threadId, actor.kind === 'agent');
    return accepted(sql, row, actor, threadId);
  }
  // Written in the key's own transaction rather than a shared statement, so that the message and
  // the stored answer commit together; the wake-ups follow the commit, as for any post.
  let written: PostOutcome | undefined;
  const request = { threadId, content: body.content, summary: body.summary, ...(post.fileIds.length > 0 && { files: post.fileIds }) };
  const answer = await once(sql, actor.id, idempotency, 'send_message', request, async (tx) => {
    await lockForAttaching(tx, sql, actor.id, post.fileIds);
    [written] = await insertPosts(tx, [post], sendRulesFor(sql));
    return accepted(sql, written!, actor, threadId);
  });
  if (!answer.replayed) afterCommit(sql, log, written!, threadId, actor.kind === 'agent');
  return answer.data;
}

// What follows a post's commit: the doorbells it owes rung by this process, and the wake-ups its
// statement did not send.
export function afterCommit(sql: Sql, log: Logger, row: PostOutcome, threadId: string, fromAgent: boolean) {
  ringAfterCommit(sql, log, row.doorbells);
  if (!row.announced) wakeForNewDeliveries(sql, log, row.deliveryIds, row.recipientIds);
  if (fromAgent && row.deliveryIds.length > 0) countTowardsLoop(sql, log, threadId);
}

// A post's body, validated and with the summary rule applied, ready to go into a thread.
function draft(actor: Actor, input: unknown) {
  const body = validate(NewMessage, input);
  const summary = body.summary?.trim() ? body.summary : null;
  const fileIds = body.files ?? [];
  if (fileIds.length > 0 && actor.kind !== 'agent') throw invalid('Only agents attach files; send the message without files.', 'files');
  if (codePoints(body.content) > LIMITS.summaryRequiredAbove && summary === null) {
    throw invalid(
      `summary is required when content is longer than ${LIMITS.summaryRequiredAbove} characters; add one and resend`,
      'summary',
    );
  }
  const into = (threadId: string, ringWindowMs: number | null): NewPost => ({
    threadId,
    senderAgentId: actor.kind === 'agent' ? actor.id : null,
    sender: actor.username,
    content: body.content,
    summary,
    doorbellSummary: oneLine(summary, body.content, LIMITS.webhookSummary),
    ringWindowMs,
    approvedId: null,
    fileIds,
  });
  return { body, summary, into };
}

// A message from an agent to one other agent (the A2A door's SendMessage): into `threadId` when
// given, a thread both take part in, or else into a new thread of the two, titled after the
// message. The delivery to that agent is the message's receipt for the door. Always under a key
// (A2A's messageId): the thread, the message and the stored answer commit together, and a repeat
// creates nothing. The key is also kept with the message, for as long as the message, as the id
// its sender knows it by (sent-deliveries.ts).
export async function postToAgent(
  sql: Sql,
  log: Logger,
  sender: Agent,
  recipient: Agent,
  threadId: string | null,
  input: unknown,
  idempotency: Idempotency,
): Promise<PostedToAgent> {
  const actor = asActor(sender);
  const { body, summary, into: post } = draft(actor, input);
  if (recipient.id === sender.id) throw invalid('An agent does not send messages to itself; address another agent.');
  if (threadId !== null && !isId(threadId)) throw threadNotFound();
  // A message of blanks has no line to title a thread with.
  const title = oneLine(summary, body.content, LIMITS.title) || `${sender.username} to ${recipient.username}`;
  let written: PostOutcome | undefined;
  const fileIds = body.files ?? [];
  const files = fileIds.length > 0 ? { files: await filesFingerprint(sql, fileIds) } : {};
  const request = { recipient: recipient.username, threadId, content: body.content, summary: body.summary, ...files };
  const answer = await once(sql, sender.id, idempotency, 'post_to_agent', request, async (tx) => {
    await lockForAttaching(tx, sql, sender.id, fileIds);
    const into = threadId ?? (await createThread(tx, actor, { title, participantUsernames: [recipient.username] }, sendRulesFor(sql))).id;
    [written] = await insertPosts(tx, [post(into, ringWindowFor(sql))], sendRulesFor(sql));
    const posted = accepted(sql, written!, actor, into);
    // Held for a person: no delivery yet, and no message for the client's id to name; the door
    // follows the message by the service's id (holds.ts).
    if (posted.held) return { ...posted, deliveryId: null };
    const at = written!.recipientIds.indexOf(recipient.id);
    if (at < 0) throw invalid(`${recipient.username} does not take part in this thread, or is archived; nothing was sent.`);
    await tx`insert into a2a_message_ids (message_id, a2a_message_id) values (${posted.id}, ${idempotency.key})`;
    return { ...posted, deliveryId: written!.deliveryIds[at]! };
  });
  if (!answer.replayed) afterCommit(sql, log, written!, answer.data.threadId, true);
  return answer.data;
}

export type PostedToAgent = PostedMessage & { deliveryId: string | null };

// The post's answer, or the refusal its outcome calls for.
function accepted(sql: Sql, row: PostOutcome, actor: Actor, threadId: string): PostedMessage {
  if (!row.state || !row.member || (actor.kind === 'agent' && row.state === 'closed')) throw threadNotFound();
  if (row.state === 'close-pending') {
    throw invalid('The thread is closing: a close was requested and awaits a person, so sending is rejected.');
  }
  if (row.state === 'closed') throw invalid('The thread is closed.');
  if (row.overQuotaFor !== null) {
    sendRulesFor(sql).watcher?.overQuota('message');
    throw overQuota(MESSAGES_QUOTA_USED, row.overQuotaFor);
  }
  if (!row.id) {
    throw invalid('Every other participant is archived, so the message would reach nobody; nothing was sent.');
  }
  const posted: PostedMessage = { id: row.id, threadId, createdAt: row.createdAt!.toISOString(), recipients: row.deliveryIds.length };
  if (row.heldReason) posted.held = { reason: row.heldReason, expiresAt: row.heldUntil!.toISOString() };
  return posted;
}

// The seconds to wait travel beside the sentence (Retry-After, MCP's and A2A's retryAfter).
export const MESSAGES_QUOTA_USED =
  'You have sent as many messages as your quota allows this minute; nothing was sent. It renews at the next minute (Retry-After says in how many seconds), or a person can raise it.';

// Posts waiting for their statement, at most (each holds up to 10 000 characters in memory): under
// a burst the database works through a queue this long in well under a second.
export const MAX_QUEUED_POSTS = 2_000;
const posts = batchedStatement(insertPosts, { maxQueued: MAX_QUEUED_POSTS });

// Every post's outcome, in the order given: the thread's state and whether the sender takes part
// (null state: no such thread), and the message with its deliveries when it was created.
//
// People's rules ride in the same statement, so that no rule changed at the same moment can let a
// post through and nothing costs a round trip of its own. An agent's message counts against its
// quota (send_counts: per minute, counted where the post is written, so across every instance);
// over it, nothing is written. A message of a held agent, into a held thread or one the loop
// breaker paused, is written to held_messages instead: no delivery, no doorbell, no event for
// anyone but its sender until a person approves it (holds.ts). People are never counted or held.
// `rules`: those of the pool; a caller that writes in its own transaction passes its pool's.
export async function insertPosts(sql: Queries, posts: NewPost[], rules = sendRulesFor(sql as Sql)): Promise<PostOutcome[]> {
  const column = <K extends keyof NewPost>(key: K) => posts.map((p) => p[key]);
  return sql<PostOutcome[]>`
    with input as (
      select i.n, coalesce(i.approved_id, uuid_v7()) as message_id, i.thread_id, i.sender_agent_id, i.sender, i.content, i.summary,
             i.doorbell_summary, i.ring_window_ms, i.approved_id is not null as approved, i.file_ids, i.inbox_summary
      from unnest(${column('threadId')}::uuid[], ${column('senderAgentId')}::uuid[], ${column('sender')}::text[],
                  ${column('content')}::text[], ${column('summary')}::text[], ${column('doorbellSummary')}::text[],
                  ${column('ringWindowMs')}::int[], ${column('approvedId')}::uuid[], ${posts.map((p) => p.fileIds.join(','))}::text[],
                  ${posts.map((p) => inboxSummary(p.summary, p.content))}::text[])
           with ordinality as i(thread_id, sender_agent_id, sender, content, summary, doorbell_summary, ring_window_ms, approved_id, file_ids,
                                inbox_summary, n)
    ), thread as (
      select i.n, t.state, t.title,
             i.sender_agent_id is null or exists (
               select 1 from participants p where p.thread_id = t.id and p.agent_id = i.sender_agent_id
             ) as member,
             case when s.id is null or i.approved then null
                  when t.paused_at is not null then 'loop'
                  when t.holds_messages then 'thread'
                  when s.holds_messages then 'agent' end as held,
             case when s.id is null or i.approved then 0 else coalesce(s.messages_per_minute, ${rules.messagesPerMinute}) end as quota
      from input i join threads t on t.id = i.thread_id left join agents s on s.id = i.sender_agent_id
    ), recipients as (
      select i.n, a.id, ${webhookActive(sql, 'a')} as webhook, a.webhook_url, ${webhookVersion(sql, 'a')} as webhook_version,
             ${secretVersion(sql, 'a')} as secret_version
      from input i join participants p on p.thread_id = i.thread_id join agents a on a.id = p.agent_id
      where a.archived_at is null and a.id is distinct from i.sender_agent_id
    ), sendable as (
      select i.n, i.sender_agent_id, thread.held, thread.quota
      from input i join thread on thread.n = i.n
      where thread.member and thread.state = 'open' and exists (select 1 from recipients r where r.n = i.n)
    ), counting as (
      select s.n, s.sender_agent_id, s.quota, row_number() over (partition by s.sender_agent_id order by s.n) as rank,
             count(*) over (partition by s.sender_agent_id) as posts
      from sendable s where s.quota > 0
    ), counter as (
      insert into send_counts as c (agent_id, kind, window_start, count)
      select sender_agent_id, 'message', date_trunc('minute', now()), max(posts) from counting group by sender_agent_id
      on conflict (agent_id, kind) do update
        set count = case when c.window_start = excluded.window_start then c.count + excluded.count else excluded.count end,
            window_start = excluded.window_start
      returning agent_id, count
    ), over_quota as (
      select k.n from counting k join counter c on c.agent_id = k.sender_agent_id where c.count - k.posts + k.rank > k.quota
    ), admitted as (
      select s.n, s.held from sendable s where not exists (select 1 from over_quota o where o.n = s.n)
    ), message as (
      insert into messages (id, thread_id, sender_agent_id, sender, content, summary)
      select i.message_id, i.thread_id, i.sender_agent_id, i.sender, i.content, i.summary
      from input i join admitted on admitted.n = i.n
      where admitted.held is null
      order by i.n
      returning id, created_at
    ), held as (
      insert into held_messages (id, thread_id, sender_agent_id, sender, content, summary, reason, expires_at, file_ids)
      select i.message_id, i.thread_id, i.sender_agent_id, i.sender, i.content, i.summary, admitted.held,
             now() + ${rules.holdHours} * interval '1 hour', nullif(string_to_array(i.file_ids, ','), '{}')::uuid[]
      from input i join admitted on admitted.n = i.n
      where admitted.held is not null
      order by i.n
      returning id, created_at, reason, expires_at
    ), ${attachFiles(sql, sql`select i.message_id, i.thread_id, i.file_ids from message join input i on i.message_id = message.id`)}, delivery as (
      insert into deliveries (message_id, thread_id, recipient_id, webhook, publish_attempts, sender, summary, carries_files)
      select i.message_id, i.thread_id, r.id, r.webhook, case when r.webhook then 1 else 0 end, i.sender, i.inbox_summary, i.file_ids <> ''
      from message join input i on i.message_id = message.id join recipients r on r.n = i.n
      order by i.n
      returning id, message_id, recipient_id, webhook, publish_attempts, send_attempts, resends
    ), doorbell as (
      select d.id, d.webhook, i.ring_window_ms, json_build_object(
               'messageId', d.message_id, 'threadId', i.thread_id, 'threadTitle', thread.title, 'sender', i.sender,
               'summary', i.doorbell_summary, 'recipientId', r.id, 'url', r.webhook_url, 'webhookVersion', r.webhook_version,
               'secretVersion', r.secret_version, 'files', cardinality(string_to_array(i.file_ids, ','))
             ) as doorbell
      from delivery d join input i on i.message_id = d.message_id join thread on thread.n = i.n
      join recipients r on r.n = i.n and r.id = d.recipient_id
      where d.webhook
    ), active as (${markActive(sql, sql`select i.thread_id from message join input i on i.message_id = message.id`)}
    ), job as (
      select (j).id::text as id, (j).payload from (${addNotifyJobs(sql, 'doorbell', { doorbell: true, ringWindowColumn: 'ring_window_ms' })}) as queued(j)
    ), wake as (${wakeWithJobs(sql, 'delivery')}
    ), delivered as (
      select message_id, array_agg(id) as ids, array_agg(recipient_id) as recipients from delivery group by message_id
    ), rung as (
      select d.message_id, json_agg(json_build_object(
               'id', job.id, 'payload', job.payload,
               'owed', json_build_object('publish', d.publish_attempts, 'attempt', d.send_attempts + 1, 'resend', d.resends)
             )) as jobs
      from job join delivery d on d.id::text = job.payload ->> 'deliveryId'
      -- Only those that wait for this process's ringer: one due at once is the queue's.
      join doorbell on doorbell.id = d.id and doorbell.ring_window_ms is not null
      group by d.message_id
    )
    -- job and wake are plain SELECTs, which PostgreSQL runs only when referenced: hence the counts.
    select thread.state, coalesce(thread.member, false) as member, coalesce(message.id, held.id) as id,
           coalesce(message.created_at, held.created_at) as "createdAt",
           coalesce(delivered.ids, '{}') as "deliveryIds", coalesce(delivered.recipients, '{}') as "recipientIds",
           (select count(*) from job) + (select count(*) from wake) > 0 as announced,
           coalesce(rung.jobs, '[]') as doorbells, held.reason as "heldReason", held.expires_at as "heldUntil",
           case when exists (select 1 from over_quota o where o.n = i.n)
                then ceil(extract(epoch from date_trunc('minute', now()) + interval '1 minute' - clock_timestamp()))::int end as "overQuotaFor"
    from input i
    left join thread on thread.n = i.n
    left join message on message.id = i.message_id
    left join held on held.id = i.message_id
    left join delivered on delivered.message_id = i.message_id
    left join rung on rung.message_id = i.message_id
    order by i.n`;
}

// A message as the driver reads it.
export type MessageRow = Omit<MessageRecord, 'createdAt'> & { createdAt: Date };

export const toMessage = (r: MessageRow): MessageRecord => ({
  id: r.id,
  threadId: r.threadId,
  sender: r.sender,
  content: r.content,
  summary: r.summary,
  createdAt: r.createdAt.toISOString(),
  files: r.files,
});

export type MessagePage = { messages: MessageRecord[]; omittedMessageIds: string[] };

// The newest `limit` messages of a thread, oldest first. With a budget (characters of content and
// summary), only the newest that fit in it are returned and the rest of the page is named by id,
// newest first, for the caller to read one by one. A read is recorded for each message returned,
// and only for those.
export async function listMessagesWithin(
  sql: Sql,
  actor: Actor,
  threadId: string,
  limit: number,
  budget: number | null,
): Promise<MessagePage> {
  if (!isId(threadId)) throw threadNotFound();
  // One row with nulls when the page is empty, so that `visible` is always answered.
  const rows = await sql<(MessageRow & { visible: boolean; kept: boolean })[]>`
    with visible as (
      select 1 where ${agentSeesThread(sql, sql`${threadId}::uuid`, actor.id)}
    ), page as (
      select m.id, m.thread_id as "threadId", m.sender, m.content, m.summary, m.created_at as "createdAt",
             ${filesOf(sql, sql`m.id`)} as files,
             sum(length(m.content) + coalesce(length(m.summary), 0)) over (order by m.id desc) as running
      from messages m
      where m.thread_id = ${threadId} and exists (select 1 from visible)
      order by m.id desc limit ${limit}
    ), kept as (
      select id from page where ${budget}::int is null or running <= ${budget}::int
    ), fetched as (
      update deliveries set ${toFetched(sql)}
      where id in (${inIdOrder(sql, sql`recipient_id = ${actor.id} and message_id in (select id from kept) and step <> 'fetched'`)})
    )
    select exists (select 1 from visible) as visible, page.id in (select id from kept) as kept, page.*
    from (select 1) as one left join page on true
    order by page.id`;
  if (!rows[0]?.visible) throw threadNotFound();
  const listed = rows.filter((r) => r.id !== null);
  return {
    messages: listed.filter((r) => r.kept).map(toMessage),
    omittedMessageIds: listed.filter((r) => !r.kept).map((r) => r.id).reverse(),
  };
}

// The contract's listing: the whole page, however long.
export const listMessages = async (sql: Sql, actor: Actor, threadId: string, limit: number) =>
  (await listMessagesWithin(sql, actor, threadId, limit, null)).messages;

// One message by id, recording only that read (the preferred way for an agent to read).
export async function readMessage(sql: Sql, actor: Actor, messageId: string): Promise<MessageRecord> {
  if (!isId(messageId)) throw messageNotFound();
  const [row] = await sql<MessageRow[]>`
    with message as (
      select m.id, m.thread_id as "threadId", m.sender, m.content, m.summary, m.created_at as "createdAt",
             ${filesOf(sql, sql`m.id`)} as files
      from messages m
      where m.id = ${messageId} and ${agentSeesThread(sql, sql`m.thread_id`, actor.id)}
    ), fetched as (
      update deliveries set ${toFetched(sql)}
      where recipient_id = ${actor.id} and message_id in (select id from message) and step <> 'fetched'
    )
    select * from message`;
  if (!row) throw messageNotFound();
  return toMessage(row);
}
