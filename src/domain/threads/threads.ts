import type { Queries, Sql } from '../../db/connect';
import type { Actor, Agent } from '../agents/actors';
import { forbidden, invalid, notFound, overQuota } from '../shared/errors';
import { sendRulesFor } from '../messages/send-rules';
import { once, type Idempotency } from '../messages/idempotency';
import { isId } from '../shared/ids';
import { listLimit } from '../shared/limits';
import { NewParticipant, NewThread, type ThreadRecord } from '../shared/schemas';
import { validate } from '../shared/validate';
import { activityNow } from './activity';
import { recordDecision, type Decider } from '../people/audit';
import { admitInvitees } from '../agents/contact-policy';
import { agentHoldsThread, agentSeesThread, threadNotFound } from './visibility';


// The thread record, participants included, in one query; `also`, columns a door adds to it.
export function selectThreads(sql: Queries, also = sql``) {
  return sql`
    select t.id, t.title, t.goal, t.state, o.username as "openedBy", t.created_at as "createdAt",
           coalesce((select json_agg(json_build_object('username', a.username) order by p.joined_at, a.username)
                     from participants p join agents a on a.id = p.agent_id
                     where p.thread_id = t.id), '[]') as participants ${also}
    from threads t join agents o on o.id = t.opened_by`;
}

// A row of selectThreads: the record with its time as the driver reads it.
export type ThreadRow = Omit<ThreadRecord, 'createdAt'> & { createdAt: Date };

export function toRecord(row: ThreadRow): ThreadRecord {
  return { ...row, createdAt: row.createdAt.toISOString() };
}

// An agent gets the thread only while it sees it (see visibility.ts); a person sees every thread.
export async function getThread(sql: Queries, actor: Actor, threadId: string): Promise<ThreadRecord> {
  if (!isId(threadId)) throw threadNotFound();
  const rows =
    actor.kind === 'agent'
      ? await sql<ThreadRow[]>`${selectThreads(sql)} where t.id = ${threadId} and ${agentSeesThread(sql, sql`t.id`, actor.id)}`
      : await sql<ThreadRow[]>`${selectThreads(sql)} where t.id = ${threadId}`;
  if (!rows[0]) throw threadNotFound();
  return toRecord(rows[0]);
}

// A page of an agent's threads: at most `limit`, older than the thread `after`. Without either, every
// thread (the list before paging; CHANGELOG.md announces the default page that replaces it).
export type ThreadListPage = { limit: number; after: string | null } | null;

export const BAD_THREAD_CURSOR = 'after must be a threadId from the thread list';

// From query values or tool arguments: paged when `limit` or `after` is given, `limit` by the rule
// of every list.
export function threadListPage(raw: Record<string, unknown>): ThreadListPage {
  const given = (value: unknown) => value !== undefined && value !== null && value !== '';
  if (!given(raw.limit) && !given(raw.after)) return null;
  if (given(raw.after) && !isId(raw.after)) throw invalid(BAD_THREAD_CURSOR, 'after');
  return { limit: listLimit(raw.limit), after: given(raw.after) ? (raw.after as string) : null };
}

// The threads an agent sees, newest first: the visibility rule as a join, so that the agent's own
// participations drive the scan.
export async function listThreads(sql: Sql, agent: Agent, page: ThreadListPage = null): Promise<ThreadRecord[]> {
  const rows = await sql<ThreadRow[]>`${selectThreads(sql)}
    join participants me on me.thread_id = t.id and me.agent_id = ${agent.id}
    where t.state <> 'closed' ${page?.after ? sql`and t.id < ${page.after}` : sql``}
    order by t.id desc
    ${page ? sql`limit ${page.limit}` : sql``}`;
  return rows.map(toRecord);
}

// Usernames that name active agents, or a 400 naming the first that does not.
async function resolveAgents(sql: Queries, usernames: string[], field: string): Promise<string[]> {
  if (usernames.length === 0) return [];
  const rows = await sql<{ id: string; username: string }[]>`
    select id, username from agents where username = any(${usernames}) and archived_at is null`;
  const found = new Map(rows.map((r) => [r.username, r.id]));
  const missing = usernames.find((u) => !found.has(u));
  if (missing !== undefined) throw invalid(`${field} names ${missing}, which is not an active agent`);
  return usernames.map((u) => found.get(u)!);
}

export async function openThread(sql: Sql, actor: Actor, input: unknown, idempotency?: Idempotency): Promise<ThreadRecord> {
  if (actor.kind !== 'agent') throw forbidden('Only agents open threads.');
  const body = validate(NewThread, input);
  if (!idempotency) return sql.begin((tx) => createThread(tx, actor, body, sendRulesFor(sql)));
  const request = { title: body.title, goal: body.goal, participantUsernames: body.participantUsernames };
  const answer = await once(sql, actor.id, idempotency, 'open_thread', request, (tx) => createThread(tx, actor, body, sendRulesFor(sql)));
  return answer.data;
}

// Within a transaction, the caller's when it writes more that must commit with the thread (`rules`:
// those of the caller's pool). The invitees' contact policies are checked in it, under their
// locks, before the thread is written. The thread counts against the agent's quota of threads per
// hour in the statement that writes it (send_counts, as posts count theirs): over it, nothing is written.
export async function createThread(sql: Queries, actor: Actor, body: NewThread, rules = sendRulesFor(sql as Sql)): Promise<ThreadRecord> {
  const others = [...new Set(body.participantUsernames ?? [])].filter((u) => u !== actor.username);
  const ids = await resolveAgents(sql, others, 'participantUsernames');
  await admitInvitees(sql, actor, ids);
  const [row] = await sql<{ id: string | null; overQuotaFor: number | null }[]>`
    with quota as (
      select coalesce(threads_per_hour, ${rules.threadsPerHour}) as quota from agents where id = ${actor.id}
    ), counter as (
      insert into send_counts as c (agent_id, kind, window_start, count)
      select ${actor.id}, 'thread', date_trunc('hour', now()), 1 from quota where quota > 0
      on conflict (agent_id, kind) do update
        set count = case when c.window_start = excluded.window_start then c.count + 1 else 1 end, window_start = excluded.window_start
      returning count
    ), thread as (
      insert into threads (title, goal, opened_by)
      select ${body.title}, ${body.goal ?? null}, ${actor.id}
      where not exists (select 1 from counter, quota where counter.count > quota.quota)
      returning id
    ), joined as (
      insert into participants (thread_id, agent_id)
      select thread.id, agent_id from thread, unnest(${[actor.id, ...ids]}::uuid[]) as agent_id
    )
    select (select id from thread) as id,
           case when not exists (select 1 from thread)
                then ceil(extract(epoch from date_trunc('hour', now()) + interval '1 hour' - clock_timestamp()))::int end as "overQuotaFor"`;
  if (row!.overQuotaFor !== null) {
    rules.watcher?.overQuota('thread');
    throw overQuota(THREADS_QUOTA_USED, row!.overQuotaFor);
  }
  return getThread(sql, actor, row!.id!);
}

export const THREADS_QUOTA_USED =
  'You have opened as many threads as your quota allows this hour; nothing was created. It renews at the next hour (Retry-After says in how many seconds), or a person can raise it.';

// Joining gives the whole history in the listing; deliveries start with the next message. The
// caller holds the thread from its check until the participant is written and the record read, so
// a participant never joins a thread that closed meanwhile, nor on behalf of a caller removed
// meanwhile (a person sees every thread, so only its existence is held for a person).
export async function addParticipant(sql: Sql, actor: Actor, threadId: string, input: unknown): Promise<ThreadRecord> {
  const body = validate(NewParticipant, input);
  if (!isId(threadId)) throw threadNotFound();
  return sql.begin(async (tx) => {
    const held =
      actor.kind === 'agent'
        ? await agentHoldsThread(tx, threadId, actor.id)
        : await tx`select 1 from threads where id = ${threadId} for share`;
    if (!held[0]) throw threadNotFound();
    const [agentId] = await resolveAgents(tx, [body.username], 'username');
    await admitInvitees(tx, actor, [agentId!], threadId);
    await tx`
      insert into participants (thread_id, agent_id) values (${threadId}, ${agentId!})
      on conflict do nothing`;
    return getThread(tx, actor, threadId);
  });
}

// A person's control: the agent leaves the thread and loses it (404 from then on, and its inbox
// no longer lists the thread's deliveries). Messages it sent stay in the history.
// The decision is recorded with the participants before and after.
export async function removeParticipant(sql: Sql, decider: Decider, threadId: string, username: string): Promise<ThreadRecord> {
  if (!isId(threadId)) throw notFound('No such thread.');
  return sql.begin(async (tx) => {
    const [row] = await tx<{ thread: boolean; removed: boolean }[]>`
      with removed as (
        delete from participants p using agents a
        where p.thread_id = ${threadId} and p.agent_id = a.id and a.username = ${username}
        returning 1
      )
      select exists (select 1 from threads where id = ${threadId}) as thread, exists (select 1 from removed) as removed`;
    if (!row!.thread) throw notFound('No such thread.');
    if (!row!.removed) throw notFound(`${username} is not a participant of this thread.`);
    const thread = await getThread(tx, PERSON_VIEW, threadId);
    const after = thread.participants.map((p) => p.username);
    await recordDecision(tx, decider, {
      action: 'thread.participant.remove',
      subjectType: 'thread',
      subject: threadId,
      before: { participants: [...after, username] },
      after: { participants: after },
    });
    return thread;
  });
}

// What a person sees of a thread: all of it (getThread's rule).
const PERSON_VIEW: Actor = { kind: 'person', id: '', username: '' };

// Only records the request: a person confirms or declines it. Asking again is a no-op.
export async function requestClose(sql: Sql, actor: Actor, threadId: string): Promise<ThreadRecord> {
  const thread = await getThread(sql, actor, threadId);
  if (actor.kind !== 'agent' || thread.openedBy !== actor.username) {
    throw forbidden('Only the agent that opened this thread may ask to close it.');
  }
  if (thread.state === 'close-pending') return thread;
  await sql`
    update threads set state = 'close-pending', close_requested_at = now(), ${activityNow(sql)}
    where id = ${threadId} and state = 'open'`;
  return getThread(sql, actor, threadId);
}

async function decideClose(sql: Sql, decider: Decider, threadId: string, next: 'closed' | 'open') {
  if (!isId(threadId)) throw notFound('No such thread.');
  return sql.begin(async (tx) => {
    const [row] = await tx<{ state: string; was: string; changed: boolean }[]>`
      with current as (select id, state from threads where id = ${threadId} for update),
      changed as (
        update threads t set state = ${next}, closed_at = ${next === 'closed' ? tx`now()` : null},
                             close_requested_at = ${next === 'closed' ? tx`t.close_requested_at` : null}, ${activityNow(tx)}
        from current where t.id = current.id and current.state = 'close-pending'
        returning t.state
      )
      select coalesce((select state::text from changed), current.state::text) as state, current.state::text as was,
             exists (select 1 from changed) as changed
      from current`;
    if (!row) throw notFound('No such thread.');
    if (!row.changed && !(next === 'closed' && row.state === 'closed')) {
      throw invalid(`The thread has no pending close request (it is ${row.state}).`);
    }
    if (row.changed) {
      await recordDecision(tx, decider, {
        action: next === 'closed' ? 'thread.close.confirm' : 'thread.close.decline',
        subjectType: 'thread',
        subject: threadId,
        before: { state: row.was },
        after: { state: row.state },
      });
    }
    return { id: threadId, state: row.state };
  });
}

// A person's decision on a close request. Confirming twice is harmless; declining a thread
// that is not waiting for a decision is refused so that the person learns the real state.
export const confirmClose = (sql: Sql, decider: Decider, threadId: string) => decideClose(sql, decider, threadId, 'closed');
export const declineClose = (sql: Sql, decider: Decider, threadId: string) => decideClose(sql, decider, threadId, 'open');
