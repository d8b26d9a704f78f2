import type { Queries } from '../../db/connect';
import { retryingSql, stalledSql, DELIVERY_STATES, type DeliveryState } from './delivery-states';
import { invalid } from '../shared/errors';
import { firstIdAt, isId } from '../shared/ids';
import { containing, searchText } from '../shared/search';
import { messageMatches } from '../messages/message-search';
import { checkStorableText } from '../shared/validate';

// Which deliveries a person is looking at: one state, a recipient, a thread, a search and a time
// range. The same filter picks the rows of the list, counts the Failed ones in view and chooses
// what a bulk resend resends, so the three always agree.

export type DeliveryFilter = {
  state: DeliveryState | null;
  agent: string | null;
  threadId: string | null;
  search: string | null;
  from: Date | null;
  to: Date | null;
};

// Every delivery: the filter of a list with nothing chosen.
export const NO_FILTER: DeliveryFilter = { state: null, agent: null, threadId: null, search: null, from: null, to: null };

const text = (raw: unknown) => (typeof raw === 'string' && raw.trim() !== '' ? raw.trim() : null);

function time(raw: unknown, name: string): Date | null {
  const value = text(raw);
  if (value === null) return null;
  const at = /^\d{4}-\d\d-\d\dT\d\d:\d\d/.test(value) ? new Date(value) : null;
  if (!at || Number.isNaN(at.getTime())) throw invalid(`${name} must be a date and time such as 2026-11-23T09:30:00Z`);
  return at;
}

// From query values (`state`, `agent`, `thread`, `q`, `from`, `to`); a value that cannot mean
// anything is refused with a sentence naming it.
export function deliveryFilter(raw: Record<string, unknown>): DeliveryFilter {
  const state = text(raw.state);
  if (state !== null && !(DELIVERY_STATES as readonly string[]).includes(state)) {
    throw invalid(`state must be one of ${DELIVERY_STATES.join(', ')}`);
  }
  const threadId = text(raw.thread);
  if (threadId !== null && !isId(threadId)) throw invalid('thread must be a thread id');
  const agent = text(raw.agent);
  if (agent !== null) checkStorableText(agent, 'agent');
  const from = time(raw.from, 'from');
  const to = time(raw.to, 'to');
  if (from && to && from > to) throw invalid('from must be earlier than to');
  return { state: state as DeliveryState | null, agent, threadId, search: searchText(raw.q), from, to };
}

// A delivery's id is written a moment after its created_at (its transaction's start); a minute of
// room either side lets the time range ride on the primary key and still be decided by created_at.
// Times are given to the millisecond and stored to the microsecond: `to` takes its whole millisecond.
const ID_CLOCK_ROOM_MS = 60_000;

function stateSql(sql: Queries, state: DeliveryState, stalledAfterMs: number) {
  switch (state) {
    case 'failed':
      return sql`d.step = 'failed'`;
    case 'retrying':
      return retryingSql(sql);
    case 'stalled':
      return stalledSql(sql, stalledAfterMs);
    default:
      return sql`d.step = ${state}`;
  }
}

// Conditions over deliveries `d`, their message `m`, thread `t` and recipient `a`, each preceded by
// `and`. A search that is an id finds that delivery, message or thread; any other text is looked
// for in agent names (recipient and sender, any part of them) and, through the full-text index, in
// the thread's title and the message's summary and content (whole words, as agents search).
export function filterSql(sql: Queries, f: DeliveryFilter, stalledAfterMs: number) {
  const pattern = f.search && !isId(f.search) ? containing(f.search) : null;
  return sql`
    ${f.state ? sql`and ${stateSql(sql, f.state, stalledAfterMs)}` : sql``}
    ${f.agent ? sql`and d.recipient_id = (select id from agents where username = ${f.agent})` : sql``}
    ${f.threadId ? sql`and d.thread_id = ${f.threadId}` : sql``}
    ${f.search && isId(f.search) ? sql`and (d.id = ${f.search} or d.message_id = ${f.search} or d.thread_id = ${f.search})` : sql``}
    ${pattern
      ? sql`and (a.username ilike ${pattern} or m.sender ilike ${pattern} or exists (${messageMatches(sql, sql`d.message_id`, f.search!)}))`
      : sql``}
    ${f.from ? sql`and d.id >= ${firstIdAt(f.from.getTime() - ID_CLOCK_ROOM_MS)} and d.created_at >= ${f.from}` : sql``}
    ${f.to ? sql`and d.id < ${firstIdAt(f.to.getTime() + ID_CLOCK_ROOM_MS)} and d.created_at < ${new Date(f.to.getTime() + 1)}` : sql``}`;
}
