import type { InboxSignal } from '../db/inbox-signal';
import type { Sql } from '../db/connect';
import type { Agent } from './agents';
import { inbox } from './deliveries';
import { invalid } from './errors';
import { isId } from './ids';
import { LIMITS, type InboxEntry } from './schemas';

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
// for the agent, or [] when the wait ends. The waiter is registered before each read, so that a
// delivery committed between the read and the wait still wakes it.
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
  for (;;) {
    const woken = Promise.withResolvers<void>();
    const unsubscribe = seconds > 0 ? signal.subscribe(agent.id, woken.resolve) : null;
    try {
      const entries = await inbox(sql, agent, limit, after);
      const remaining = deadline - performance.now();
      if (entries.length > 0 || !unsubscribe || remaining <= 0 || abort?.aborted) return entries;
      if (!(await settlesWithin(woken.promise, remaining, abort))) return [];
    } finally {
      unsubscribe?.();
    }
  }
}

// True when `promise` settles first; false when the time runs out or the caller goes away.
export function settlesWithin(promise: Promise<void>, ms: number, abort?: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    const done = (settled: boolean) => {
      clearTimeout(timer);
      abort?.removeEventListener('abort', gone);
      resolve(settled);
    };
    const gone = () => done(false);
    const timer = setTimeout(gone, ms);
    abort?.addEventListener('abort', gone, { once: true });
    void promise.then(() => done(true));
  });
}
