import type { Sql } from '../../db/connect';
import { LIMITS } from '../shared/schemas';
import type { HoldReason } from './messages';
import { oneLine } from './summary-line';
import { queueOperatorNotice } from '../people/operator-notices';

// What people are emailed about holds (sql/027_hold_notices.sql): a digest when messages start
// waiting, at most one per DIGEST_EVERY_MINUTES (told on operator webhooks too), and each pause of
// a thread by the loop breaker.
// Each is claimed in the database, so that of several instances sweeping at once one sends it.

export const DIGEST_EVERY_MINUTES = 15;
// Messages a digest names; the Overview lists them all.
export const DIGEST_NAMES = 5;

export type WaitingDigest = {
  waiting: number;
  // Messages that started waiting since the last digest.
  fresh: number;
  oldestAt: string;
  first: { id: string; sender: string; threadTitle: string; reason: HoldReason; line: string }[];
};

export type PauseNotice = { threadId: string; title: string; pausedAt: string };

// The digest to send now, or null: none is due (one went out within the interval, or another
// instance is sending it) or no message started waiting since the last. The row lock on the
// digest's mark is taken before its time is checked, so two instances never both send.
export async function claimWaitingDigest(sql: Sql, everyMinutes = DIGEST_EVERY_MINUTES): Promise<WaitingDigest | null> {
  return sql.begin(async (tx) => {
    const [due] = await tx`
      select 1 from hold_notices where kind = 'waiting' and sent_at <= now() - make_interval(mins => ${everyMinutes}) for update`;
    if (!due) return null;
    const fresh = await tx`update held_messages set noticed_at = now() where state = 'held' and noticed_at is null returning 1`;
    if (fresh.length === 0) return null;
    await tx`update hold_notices set sent_at = now() where kind = 'waiting'`;
    const [counts] = await tx<{ waiting: number; oldest: Date }[]>`
      select count(*)::int as waiting, min(created_at) as oldest from held_messages where state = 'held'`;
    const first = await tx<{ id: string; sender: string; threadTitle: string; reason: HoldReason; summary: string | null; content: string }[]>`
      select h.id, h.sender, t.title as "threadTitle", h.reason, h.summary, left(h.content, ${LIMITS.webhookSummary * 4}) as content
      from held_messages h join threads t on t.id = h.thread_id
      where h.state = 'held' order by h.id limit ${DIGEST_NAMES}`;
    const digest = {
      waiting: counts!.waiting,
      fresh: fresh.length,
      oldestAt: counts!.oldest.toISOString(),
      first: first.map(({ summary, content, ...m }) => ({ ...m, line: oneLine(summary, content, LIMITS.webhookSummary) })),
    };
    // Operator webhooks hear of the same digest, once per period, in the claim's transaction.
    const oldest = digest.first[0];
    await queueOperatorNotice(tx, {
      event: 'holds.waiting',
      waiting: digest.waiting,
      fresh: digest.fresh,
      oldestAt: digest.oldestAt,
      oldest: oldest ? { sender: oldest.sender, threadTitle: oldest.threadTitle, line: oldest.line } : null,
    });
    return digest;
  });
}

// The pauses no email has told of yet, each claimed by the one instance whose insert wrote it.
// Marks of pauses that ended (the thread resumed) go at the same time.
export async function claimPauseNotices(sql: Sql): Promise<PauseNotice[]> {
  await sql`
    delete from thread_pause_notices n
    where not exists (select 1 from threads t where t.id = n.thread_id and t.paused_at = n.paused_at)`;
  const rows = await sql<{ threadId: string; title: string; pausedAt: Date }[]>`
    with fresh as (
      insert into thread_pause_notices (thread_id, paused_at)
      select id, paused_at from threads where paused_at is not null
      on conflict do nothing
      returning thread_id, paused_at)
    select f.thread_id as "threadId", t.title, f.paused_at as "pausedAt"
    from fresh f join threads t on t.id = f.thread_id
    order by f.paused_at, f.thread_id`;
  return rows.map((r) => ({ ...r, pausedAt: r.pausedAt.toISOString() }));
}
