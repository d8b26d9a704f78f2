import type { Queries } from '../../db/connect';

// What a delivery reads as, for every door and query that shows or filters by it. A delivery's
// step (accepted → notified → delivered → fetched, or failed) is stored; "retrying" and "stalled"
// are read from it and are written here once, in SQL for filtering and counting before paging and
// in TypeScript for rows already read. (The partial index of 013_dashboard_at_scale.sql has to
// spell "retrying" out again: an index predicate cannot call a function of ours.) The states'
// names are in state-names.ts, a leaf module that the dashboard's browser code imports too.
export { DELIVERY_STATES, type DeliveryState } from '../shared/state-names';

// Retrying: the last attempt failed and the next one is queued.
export const retryingSql = (sql: Queries) => sql`d.step = 'accepted' and d.next_attempt_at is not null`;
export const isRetrying = (d: { step: string; nextAttemptAt: Date | string | null }) => d.step === 'accepted' && d.nextAttemptAt !== null;

// Stalled: the handler answered the doorbell but never reported delivered within the threshold.
export const stalledSql = (sql: Queries, thresholdMs: number) => sql`
  d.step = 'notified' and d.delivered_at is null
  and d.notified_at < now() - make_interval(secs => ${thresholdMs / 1000})`;

// Notified deliveries not yet stalled: they will be at stallsAt() unless their report comes first.
export const awaitingReportSql = (sql: Queries, thresholdMs: number) => sql`
  d.step = 'notified' and d.delivered_at is null
  and d.notified_at >= now() - make_interval(secs => ${thresholdMs / 1000})`;

type Reported = { step: string; notifiedAt: Date | string | null; deliveredAt: Date | string | null };

// When a Notified delivery with no report turns stalled; null for any other.
export function stallsAt(d: Reported, thresholdMs: number): Date | null {
  if (d.step !== 'notified' || d.deliveredAt || !d.notifiedAt) return null;
  return new Date(new Date(d.notifiedAt).getTime() + thresholdMs);
}

export function isStalled(d: Reported, thresholdMs: number, now = Date.now()): boolean {
  const at = stallsAt(d, thresholdMs);
  return at !== null && now > at.getTime();
}
