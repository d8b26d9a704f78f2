import type { Config } from '../../config';
import type { Queries, Sql } from '../../db/connect';
import { isRetrying, isStalled } from '../deliveries/delivery-states';
import { invalid, notFound } from '../shared/errors';
import { isId } from '../shared/ids';
import { keyBounds, pageOf, timeKeyBounds, timeKeyOf, type PageQuery, type TimeKeyedPageQuery } from '../shared/keyset';
import type { DeliveryStep, Page, ThreadRecord } from '../shared/schemas';
import { containing, searchText } from '../shared/search';
import { THREAD_STATES, type ThreadState } from '../shared/state-names';
import { selectThreads, toRecord, type ThreadRow } from './threads';
import { filesOf } from '../files/files';
import type { FileRecord } from '../shared/schemas';

// The threads as the people who run the service see them: every thread, closed ones included, a
// page at a time; and one thread's messages with how far each got to each recipient.

export type ThreadFilter = { state: ThreadState | null; search: string | null };

export function threadFilter(raw: Record<string, unknown>): ThreadFilter {
  const state = typeof raw.state === 'string' && raw.state !== '' ? raw.state : null;
  if (state !== null && !(THREAD_STATES as readonly string[]).includes(state)) {
    throw invalid(`state must be one of ${THREAD_STATES.join(', ')}`);
  }
  return { state: state as ThreadFilter['state'], search: searchText(raw.q) };
}

// A thread as the dashboard lists it: with its last activity (activity.ts) and its place in the list.
export type ListedThread = ThreadRecord & { lastActivityAt: string; cursor: string };

// Most recent activity first (threads_activity_idx); a search looks for any part of a title, a goal
// or a participant's name, each read through its own index (trigram indexes for the first two), so
// that a search for something rare never reads every thread.
export async function listThreadsPage(sql: Queries, filter: ThreadFilter, page: TimeKeyedPageQuery): Promise<Page<ListedThread>> {
  const pattern = filter.search ? containing(filter.search) : null;
  const rows = await sql<(ThreadRow & { lastActivityAt: Date; cursor: string })[]>`
    ${selectThreads(sql, sql`, t.last_activity_at as "lastActivityAt", ${timeKeyOf(sql, sql`t.last_activity_at`, sql`t.id`)} as cursor`)}
    where true
      ${filter.state ? sql`and t.state = ${filter.state}` : sql``}
      ${pattern
        ? sql`and t.id in (select st.id from threads st where st.title ilike ${pattern}
                           union select st.id from threads st where st.goal ilike ${pattern}
                           union select sp.thread_id from participants sp join agents sa on sa.id = sp.agent_id
                                 where sa.username ilike ${pattern})`
        : sql``}
      ${timeKeyBounds(sql, sql`t.last_activity_at`, sql`t.id`, page)}
    order by t.last_activity_at desc, t.id desc
    limit ${page.limit + 1}`;
  const threads = rows.map((r) => ({ ...toRecord(r), lastActivityAt: r.lastActivityAt.toISOString(), cursor: r.cursor }));
  return pageOf(threads, page.limit, (t) => t.cursor);
}

// One thread as people see it: the record agents get, with what people decide about the thread
// (thread-holds.ts), which agents are not shown. loopBreaker: the deployment's setting, for the
// sentence that says why a paused thread was paused.
export type PeoplesThread = ThreadRecord & {
  holdsMessages: boolean;
  pausedAt: string | null;
  // Messages of its agents that wait for a person's decision (domain/messages/holds.ts).
  waiting: number;
  loopBreaker: { messages: number; windowMinutes: number };
};

type LoopBreaker = Pick<Config, 'LOOP_BREAKER_MESSAGES' | 'LOOP_BREAKER_WINDOW_MINUTES'>;

export async function threadForPeople(sql: Queries, threadId: string, config: LoopBreaker): Promise<PeoplesThread> {
  if (!isId(threadId)) throw notFound('No such thread.');
  const [row] = await sql<(ThreadRow & { holdsMessages: boolean; pausedAt: Date | null; waiting: number })[]>`
    ${selectThreads(
      sql,
      sql`, t.holds_messages as "holdsMessages", t.paused_at as "pausedAt",
            (select count(*)::int from held_messages h where h.thread_id = t.id and h.state = 'held') as waiting`,
    )}
    where t.id = ${threadId}`;
  if (!row) throw notFound('No such thread.');
  const { holdsMessages, pausedAt, waiting, ...record } = row;
  return {
    ...toRecord(record),
    holdsMessages,
    pausedAt: pausedAt?.toISOString() ?? null,
    waiting,
    loopBreaker: { messages: config.LOOP_BREAKER_MESSAGES, windowMinutes: config.LOOP_BREAKER_WINDOW_MINUTES },
  };
}

export type RecipientProgress = {
  deliveryId: string;
  recipient: string;
  step: string;
  failedStep: string | null;
  stalled: boolean;
  retrying: boolean;
};

export type ThreadMessage = {
  id: string;
  sender: string;
  content: string;
  summary: string | null;
  createdAt: string;
  deliveries: RecipientProgress[];
  files: FileRecord[];
};

// Built as json: its times are PostgreSQL's text.
type DeliveryRow = {
  deliveryId: string;
  recipient: string;
  step: DeliveryStep;
  failedStep: DeliveryStep | null;
  notifiedAt: string | null;
  deliveredAt: string | null;
  nextAttemptAt: string | null;
};

type MessageRow = {
  id: string;
  sender: string;
  content: string;
  summary: string | null;
  createdAt: Date;
  deliveries: DeliveryRow[];
  files: FileRecord[];
};

// A thread's messages, newest first, each with its deliveries by recipient name.
export async function threadMessages(sql: Sql, threadId: string, page: PageQuery, stalledAfterMs: number): Promise<Page<ThreadMessage>> {
  if (!isId(threadId) || !(await sql<{ found: number }[]>`select 1 as found from threads where id = ${threadId}`)[0]) {
    throw notFound('No such thread.');
  }
  const rows = await sql<MessageRow[]>`
    select m.id, m.sender, m.content, m.summary, m.created_at as "createdAt",
           coalesce((select json_agg(json_build_object('deliveryId', d.id, 'recipient', a.username, 'step', d.step,
                                                       'failedStep', d.failed_step, 'notifiedAt', d.notified_at,
                                                       'deliveredAt', d.delivered_at, 'nextAttemptAt', d.next_attempt_at)
                                     order by a.username)
                     from deliveries d join agents a on a.id = d.recipient_id where d.message_id = m.id), '[]') as deliveries,
           ${filesOf(sql, sql`m.id`)} as files
    from messages m
    where m.thread_id = ${threadId} ${keyBounds(sql, sql`m.id`, page)}
    order by m.id desc
    limit ${page.limit + 1}`;
  const messages = rows.map((r) => ({
    id: r.id,
    sender: r.sender,
    content: r.content,
    summary: r.summary,
    createdAt: r.createdAt.toISOString(),
    deliveries: r.deliveries.map((d) => ({
      deliveryId: d.deliveryId,
      recipient: d.recipient,
      step: d.step,
      failedStep: d.failedStep,
      stalled: isStalled(d, stalledAfterMs),
      retrying: isRetrying(d),
    })),
    files: r.files,
  }));
  return pageOf(messages, page.limit, (m) => m.id);
}
