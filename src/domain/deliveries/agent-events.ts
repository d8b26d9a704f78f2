import type { Sql } from '../../db/connect';
import type { Agent } from '../agents/actors';
import { gone, invalid } from '../shared/errors';
import { holdStatus, type HoldRowJson, type HoldStatus } from '../messages/holds';
import { agentSeesThread } from '../threads/visibility';
import { doorbellData, DOORBELL_EVENT, type DoorbellData } from './doorbell-body';

// An agent's events, in the order they happened to it, for the event stream (GET /api/events) and
// whatever door holds one for the agent (`ams listen`, `ams channel`). The rows are written by the
// database whoever makes the change (sql/019_agent_events.sql):
// - message.created, for the recipient of each new delivery, with exactly the doorbell's data;
// - delivery.delivered and delivery.fetched, for the agent that sent the message, the first time
//   its delivery is reported delivered and the first time it is read.
// Reading them records nothing: a stream is a way to be told, not a read, and moves no step.
export type EventType = typeof DOORBELL_EVENT | 'delivery.delivered' | 'delivery.fetched' | HoldEventType;
// What a sender is told of its message that waits for a person, and of the decision.
export type HoldEventType = 'message.held' | 'message.approved' | 'message.rejected';
export type HoldEventData = { messageId: string; threadId: string } & HoldStatus;

// What a sender is told of a recipient's step: which delivery, whose, and when it got there.
export type ReceiptEventData = { deliveryId: string; messageId: string; threadId: string; recipient: string; at: string };

export type AgentEvent =
  | { id: string; type: typeof DOORBELL_EVENT; data: DoorbellData }
  | { id: string; type: 'delivery.delivered' | 'delivery.fetched'; data: ReceiptEventData }
  | { id: string; type: HoldEventType; data: HoldEventData };

// A position in one agent's events: the writing transaction's id, then the order within it. As an
// event id it is written `<xid>-<seq>`, both decimal.
export type EventCursor = { xid: string; seq: string };
export const eventId = (c: EventCursor) => `${c.xid}-${c.seq}`;

const CURSOR = /^(\d{1,20})-(\d{1,19})$/;
export const NOT_OURS = 'Last-Event-ID must be the id of an event this stream sent (two whole numbers joined by "-").';

export function parseEventId(raw: string): EventCursor {
  const match = CURSOR.exec(raw.trim());
  // Both parts within their columns' ranges (xid8 and bigint), so that the statement never fails.
  if (!match || BigInt(match[1]!) >= 2n ** 64n || BigInt(match[2]!) >= 2n ** 63n) throw invalid(NOT_OURS, 'Last-Event-ID');
  return { xid: match[1]!, seq: match[2]! };
}

export const eventsGoneSentence = (retentionHours: number) =>
  `Events after that id are no longer kept (a stream keeps ${retentionHours} hours of events): open the stream without Last-Event-ID, then read your inbox (GET /api/deliveries).`;

// Where a stream starts. After an event id the agent was sent: right after it, unless events
// after it are gone (410, so that the client knows to read its inbox instead): removed by the
// retention sweep, or never recorded. Any other id is 400: one of a transaction that has not
// begun, and, once the agent's events are recorded, one that names none of them and lies above
// its floor (resuming after a made-up position such as `0-0` would replay or skip events on the
// client's word). An id at or below the floor may be that of an event swept since: the floor
// moves in the sweep's own statement, so one statement never sees the event gone and the floor
// not yet moved. Without an id: now, that is after every transaction that has ended; events of
// those still running are sent once they commit (one may repeat what the inbox shows: open the
// stream first, then read the inbox, and drop repeats by deliveryId).
//
// An agent's events are recorded from its first stream on (agents.events_recorded_since, read by
// the triggers of sql/019). Marking takes the agent's row FOR UPDATE first, which waits for every
// transaction that has written a delivery to the agent (each holds the row FOR KEY SHARE through
// its foreign key) and makes any that writes one meanwhile wait for the mark: every transaction
// still running when the stream starts writes its events after seeing the mark. (So every writer
// of deliveries must run in READ COMMITTED, where each statement of the trigger sees what has
// committed before it; they all do.)
export async function streamStart(sql: Sql, agent: Agent, after: string | null, retentionHours: number): Promise<EventCursor> {
  const cursor = after === null ? null : parseEventId(after);
  const [marked] = await sql<{ first: boolean }[]>`
    with held as (
      select id from agents where id = ${agent.id} and events_recorded_since is null for update
    ), marked as (
      update agents a set events_recorded_since = now() from held where a.id = held.id returning 1
    )
    select exists (select 1 from marked) as first`;
  if (cursor === null) {
    const [now] = await sql<{ xid: string }[]>`select pg_snapshot_xmin(pg_current_snapshot())::text as xid`;
    return { xid: now!.xid, seq: '0' };
  }
  const [checked] = await sql<{ begun: boolean; issued: boolean; gone: boolean }[]>`
    with floor as (
      select xid, seq from agent_event_floors where agent_id = ${agent.id}
    )
    select ${cursor.xid}::xid8 < pg_snapshot_xmax(pg_current_snapshot()) as begun,
           exists (select 1 from agent_events e
                   where e.agent_id = ${agent.id} and e.xid = ${cursor.xid}::xid8 and e.seq = ${cursor.seq}::bigint)
             or exists (select 1 from floor f where (f.xid, f.seq) >= (${cursor.xid}::xid8, ${cursor.seq}::bigint)) as issued,
           exists (select 1 from floor f where (f.xid, f.seq) > (${cursor.xid}::xid8, ${cursor.seq}::bigint)) as gone`;
  if (!checked!.begun) throw invalid(NOT_OURS, 'Last-Event-ID');
  // Marked only now: nothing after that id was recorded, and nothing to check it against.
  if (marked!.first) throw gone(eventsGoneSentence(retentionHours));
  if (!checked!.issued) throw invalid(NOT_OURS, 'Last-Event-ID');
  if (checked!.gone) throw gone(eventsGoneSentence(retentionHours));
  return cursor;
}

type EventRow = {
  xid: string;
  seq: string;
  type: EventType;
  delivery_id: string | null;
  // A held message's events: the message as held_messages keeps it.
  hold: (Omit<HoldRowJson, 'expires_at' | 'decided_at'> & { expires_at: string; decided_at: string | null; thread_id: string; id: string }) | null;
  // Null when the delivery is gone (pruned with its message) or the agent no longer sees the thread.
  message_id: string | null;
  thread_id: string | null;
  title: string | null;
  sender: string | null;
  summary: string | null;
  content: string | null;
  files: number;
  recipient: string | null;
  delivered_at: string | null;
  fetched_at: string | null;
};

export type EventPage = {
  events: AgentEvent[];
  // Where the next read starts: past every event read, sent or not.
  next: EventCursor;
  // The page was full: there may be more to read at once.
  more: boolean;
  // Events after `next` have committed but wait for an older transaction still running: read
  // again shortly, since that transaction's end may notify nobody.
  held: boolean;
};

// The agent's events after `cursor`, at most `limit`, oldest first. Only events no running
// transaction can precede are read (xid below the snapshot's xmin): a later read never finds an
// event before one already handed out, so resuming after an id misses nothing. Events of threads
// the agent does not see now (removed, closed) are passed over, as every door passes them over.
export async function eventsAfter(sql: Sql, agent: Agent, cursor: EventCursor, limit: number): Promise<EventPage> {
  const [page] = await sql<{ rows: EventRow[]; held: boolean }[]>`
    with horizon as (
      select pg_snapshot_xmin(pg_current_snapshot()) as xmin
    ), page as (
      select e.xid, e.seq, e.type, e.delivery_id, e.message_id
      from agent_events e, horizon h
      where e.agent_id = ${agent.id} and (e.xid, e.seq) > (${cursor.xid}::xid8, ${cursor.seq}::bigint) and e.xid < h.xmin
      order by e.agent_id, e.xid, e.seq
      limit ${limit}
    ), rows as (
      select p.xid, p.seq, p.type, p.delivery_id, d.message_id, d.thread_id, t.title, m.sender, m.summary,
             case when m.summary is null then m.content end as content, r.username as recipient,
             (select count(*)::int from message_files mf where mf.message_id = d.message_id) as files,
             d.delivered_at, d.fetched_at,
             case when held.id is not null then json_build_object(
               'id', held.id, 'thread_id', held.thread_id, 'state', held.state, 'reason', held.reason, 'expires_at', held.expires_at,
               'decided_at', held.decided_at, 'decided_by_name', held.decided_by_name, 'rejection_reason', held.rejection_reason) end as hold
      from page p
      left join held_messages held on held.id = p.message_id
      left join deliveries d on d.id = p.delivery_id and ${agentSeesThread(sql, sql`d.thread_id`, agent.id)}
      left join messages m on m.id = d.message_id
      left join threads t on t.id = d.thread_id
      left join agents r on r.id = d.recipient_id
    )
    select coalesce((select json_agg(json_build_object(
               'xid', r.xid::text, 'seq', r.seq::text, 'type', r.type, 'delivery_id', r.delivery_id, 'message_id', r.message_id,
               'thread_id', r.thread_id, 'title', r.title, 'sender', r.sender, 'summary', r.summary, 'content', r.content,
               'recipient', r.recipient, 'delivered_at', r.delivered_at, 'fetched_at', r.fetched_at, 'hold', r.hold, 'files', r.files) order by r.xid, r.seq)
             from rows r), '[]') as rows,
           -- One lower bound on xid, so that the scan starts there: given beside the row comparison,
           -- PostgreSQL starts at the cursor and reads every event up to the horizon, on every page.
           exists (select 1 from agent_events e, horizon h
                   where e.agent_id = ${agent.id} and e.xid >= greatest(h.xmin, ${cursor.xid}::xid8)
                     and (e.xid > ${cursor.xid}::xid8 or e.seq > ${cursor.seq}::bigint)) as held`;
  const rows = page!.rows;
  const last = rows.at(-1);
  return {
    events: rows.flatMap((r) => (r.hold !== null ? [toHoldEvent(r, r.hold)] : r.message_id === null ? [] : [toEvent(r)])),
    next: last ? { xid: last.xid, seq: last.seq } : cursor,
    more: rows.length === limit,
    held: page!.held,
  };
}

function toHoldEvent(r: EventRow, hold: NonNullable<EventRow['hold']>): AgentEvent {
  const type = r.type as HoldEventType;
  const status = holdStatus({ ...hold, expires_at: new Date(hold.expires_at), decided_at: hold.decided_at === null ? null : new Date(hold.decided_at) });
  // What the event says is what happened then: a held event stays one of holding after a decision.
  const data: HoldEventData =
    type === 'message.held'
      ? { messageId: hold.id, threadId: hold.thread_id, ...status, state: 'held', decidedAt: null, decidedBy: null, rejectionReason: null }
      : { messageId: hold.id, threadId: hold.thread_id, ...status };
  return { id: eventId(r), type, data };
}

function toEvent(r: EventRow): AgentEvent {
  const id = eventId(r);
  if (r.type === DOORBELL_EVENT) {
    const data = doorbellData({
      deliveryId: r.delivery_id!,
      messageId: r.message_id!,
      threadId: r.thread_id!,
      threadTitle: r.title!,
      sender: r.sender!,
      summary: r.summary,
      content: r.content ?? '',
      files: r.files,
    });
    return { id, type: r.type, data };
  }
  const at = r.type === 'delivery.delivered' ? r.delivered_at : r.fetched_at;
  return {
    id,
    type: r.type as 'delivery.delivered' | 'delivery.fetched',
    data: { deliveryId: r.delivery_id!, messageId: r.message_id!, threadId: r.thread_id!, recipient: r.recipient!, at: new Date(at!).toISOString() },
  };
}

// Retention (domain/messages/retention.ts, hourly): removes up to `limit` events older than
// `retentionHours` and answers how many. Each agent's floor moves up to the newest position
// removed, so that resuming from before it is refused rather than silently short. Removed by time
// (a transaction's start), so an event may go while an older position stays: the floor is then
// conservative, never short.
export async function removeExpiredEvents(sql: Sql, retentionHours: number, limit: number): Promise<number> {
  const [swept] = await sql<{ removed: number }[]>`
    with removed as (
      delete from agent_events where (agent_id, xid, seq) in (
        select agent_id, xid, seq from agent_events where created_at < now() - make_interval(hours => ${retentionHours}) limit ${limit})
      returning agent_id, xid, seq
    ), newest as (
      select distinct on (agent_id) agent_id, xid, seq from removed order by agent_id, xid desc, seq desc
    ), floors as (
      insert into agent_event_floors (agent_id, xid, seq) select agent_id, xid, seq from newest
      on conflict (agent_id) do update set xid = excluded.xid, seq = excluded.seq
      where (agent_event_floors.xid, agent_event_floors.seq) < (excluded.xid, excluded.seq)
    )
    select count(*)::int as removed from removed`;
  return swept!.removed;
}
