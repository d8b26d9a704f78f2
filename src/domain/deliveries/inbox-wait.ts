import type { InboxSignal } from '../../db/inbox-signal';
import type { Sql } from '../../db/connect';
import { isDatabaseUnavailable } from '../../db/unavailable';
import { settlesWithin } from '../../settles-within';
import type { Agent } from '../agents/actors';
import { inbox } from './inbox';
import { invalid } from '../shared/errors';
import { isId } from '../shared/ids';
import { LIMITS, type InboxEntry } from '../shared/schemas';

// The inbox cursor: a deliveryId, or nothing.
export function inboxCursor(raw: unknown): string | undefined {
  if (raw === undefined || raw === null || raw === '') return undefined;
  if (typeof raw !== 'string' || !isId(raw)) throw invalid('after must be a deliveryId from the inbox');
  return raw;
}

// Unlike a list limit, a bad wait is refused rather than replaced: silently waiting 0 seconds
// would turn an agent's loop into the busy polling the wait exists to prevent.
export function waitSeconds(raw: unknown, max: number = LIMITS.inboxWaitSeconds): number {
  if (raw === undefined || raw === null || raw === '') return 0;
  const n = typeof raw === 'number' ? raw : typeof raw === 'string' && /^\s*\d+(\.\d+)?\s*$/.test(raw) ? Number(raw) : NaN;
  if (!(n >= 0 && n <= max)) {
    throw invalid(`wait must be a number of seconds from 0 to ${max}`);
  }
  return n;
}

// The inbox, held for up to `seconds` while it is empty: answers as soon as a delivery is accepted
// for the agent, or [] when the wait ends. The waiter is registered before the first read and
// stays registered until it answers, and every read starts with a fresh wake-up promise, so that
// a delivery committed after a read's snapshot always wakes it to read again.
export async function waitForInbox(
  sql: Sql,
  signal: InboxSignal,
  agent: Agent,
  limit: number,
  seconds: number,
  abort?: AbortSignal,
  after?: string,
): Promise<InboxEntry[]> {
  const deadline = performance.now() + seconds * 1000;
  let woken = Promise.withResolvers<void>();
  let since = clock;
  const unsubscribe =
    seconds > 0
      ? signal.subscribe(agent.id, () => {
          since = clock;
          woken.resolve();
        })
      : null;
  if (!unsubscribe) return inbox(sql, agent, limit, after);
  try {
    for (let first = true; ; first = false) {
      woken = Promise.withResolvers<void>();
      let entries: InboxEntry[];
      try {
        entries = await sharedRead(sql, agent, limit, after, since);
      } catch (error) {
        // The listener wakes every waiter as soon as it is back after an outage, when the query
        // pool may still be reconnecting: a read that meets the database away does not end a wait
        // the outage did not end. It reads again when woken, or after RETRY_READ_MS; a wait that
        // cannot read by its deadline, or whose first read failed, answers the error.
        const remaining = deadline - performance.now();
        if (first || !isDatabaseUnavailable(error) || remaining <= 0 || abort?.aborted || signal.stopped()) throw error;
        await settlesWithin(woken.promise, Math.min(remaining, RETRY_READ_MS), abort);
        continue;
      }
      const remaining = deadline - performance.now();
      if (entries.length > 0 || remaining <= 0 || abort?.aborted || signal.stopped()) return entries;
      if (!(await settlesWithin(woken.promise, remaining, abort))) return [];
    }
  } finally {
    unsubscribe();
  }
}

// The query pool's longest pause between two attempts to connect (db/connect.ts): by then it has
// tried again.
const RETRY_READ_MS = 1_000;

// Waiters of one agent asking the same question share one read: the 10 000 requests woken by one
// delivery cost one query, not 10 000 identical ones. A waiter may only join a read sent after it
// registered or was last woken (`since`); an earlier read may have taken its snapshot before the
// delivery that woke it committed, so such a waiter joins the read that follows it instead.
// `clock` orders the two: a waiter notes its value when it registers and whenever it is woken, a
// read takes the next one when it is sent.
type SharedRead = { sent: number; entries: Promise<InboxEntry[]>; next?: Promise<InboxEntry[]> };
let clock = 0;
const reading = new WeakMap<Sql, Map<string, SharedRead>>();

function sharedRead(sql: Sql, agent: Agent, limit: number, after: string | undefined, since: number): Promise<InboxEntry[]> {
  let reads = reading.get(sql);
  if (!reads) reading.set(sql, (reads = new Map()));
  const key = `${agent.id} ${limit} ${after ?? ''}`;
  const send = (): Promise<InboxEntry[]> => {
    const read: SharedRead = { sent: ++clock, entries: inbox(sql, agent, limit, after) };
    reads.set(key, read);
    const done = () => {
      if (reads.get(key) === read) reads.delete(key);
    };
    read.entries.then(done, done);
    return read.entries;
  };
  const current = reads.get(key);
  if (!current) return send();
  if (current.sent > since) return current.entries;
  return (current.next ??= current.entries.then(send, send));
}
