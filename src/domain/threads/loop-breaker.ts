import type { Sql } from '../../db/connect';
import type { Logger } from '../../log';
import { sendRulesFor, type SendRules } from '../messages/send-rules';

// The loop breaker: a thread whose agents (two or more) have exchanged more than
// LOOP_BREAKER_MESSAGES messages within LOOP_BREAKER_WINDOW_MINUTES, with no person's message among
// them, is paused (threads.paused_at), and the post statement holds every later message in it
// until a person resumes it (thread-holds.ts). A person's message resets the count, and so does a
// resume (loop_counted_from).
//
// The count is read after a post commits, not inside it: the post pays nothing for it, and a
// thread is read at most once per CHECK_EVERY_MS by each process, however fast its agents post.
// A loop of agents that answer at model speed is caught at its limit exactly; a flood faster than
// that may get a few messages past it before the pause, which the quota bounds.
const CHECK_EVERY_MS = 500;

type Checks = Map<string, { at: number; again: boolean }>;
const checks = new WeakMap<Sql, Checks>();

// After a post to `threadId` commits: count soon, at most once per CHECK_EVERY_MS per thread, and
// once more at the end of that time when posts came meanwhile, so that a burst's last message counts.
export function countTowardsLoop(sql: Sql, log: Logger, threadId: string): void {
  const rules = sendRulesFor(sql);
  if (rules.loopMessages === 0) return;
  let byThread = checks.get(sql);
  if (!byThread) checks.set(sql, (byThread = new Map()));
  const seen = byThread.get(threadId);
  if (seen) {
    seen.again = true;
    return;
  }
  const entry = { at: performance.now(), again: false };
  byThread.set(threadId, entry);
  const check = () =>
    breakLoop(sql, threadId, rules)
      .then((paused) => {
        if (!paused) return;
        log.warn('loop_broken', { threadId, messages: rules.loopMessages, windowMinutes: rules.loopWindowMinutes });
        rules.watcher?.loopBroken();
      })
      .catch((error: unknown) => log.warn('loop_check_failed', { threadId, error: (error as Error).message }));
  void check().finally(() =>
    setTimeout(() => {
      byThread.delete(threadId);
      if (entry.again) countTowardsLoop(sql, log, threadId);
    }, CHECK_EVERY_MS).unref?.(),
  );
}

// Pauses the thread when its newest messages make a loop; answers whether this call paused it.
// Reads at most LOOP_BREAKER_MESSAGES + 1 messages, newest first, from the window's start: the
// thread's index by message id, whose ids (UUIDv7) begin with their time. The statement that
// pauses tells operator webhooks of it (a `thread.loop_broken` notice, operator-notices.ts), so the
// notice commits with the pause; a check that pauses nothing queues nothing.
export async function breakLoop(sql: Sql, threadId: string, rules: SendRules): Promise<boolean> {
  const rows = await sql`
    with t as (
      select id, greatest(now() - make_interval(mins => ${rules.loopWindowMinutes}), loop_counted_from) as since
      from threads where id = ${threadId} and paused_at is null and state = 'open'
    ), recent as (
      -- The window's start as the lowest id a message of it can have, given as one value so that
      -- it bounds the scan of the thread's index rather than filtering another.
      select m.sender_agent_id from messages m
      where m.thread_id = ${threadId}
        and m.id >= (select (lpad(to_hex((extract(epoch from since) * 1000)::bigint), 12, '0') || '00000000000000000000')::uuid from t)
      order by m.id desc
      limit ${rules.loopMessages + 1}
    ), verdict as (
      select count(*) > ${rules.loopMessages} and bool_and(sender_agent_id is not null) and count(distinct sender_agent_id) >= 2 as loop
      from recent
    ), paused as (
      update threads set paused_at = now()
      from t, verdict
      where threads.id = t.id and verdict.loop and threads.paused_at is null
      returning threads.id, threads.title, threads.paused_at
    )
    -- The notice's fields are OperatorNotice's 'thread.loop_broken' (operator-notices.ts).
    select queue_operator_notice('thread.loop_broken', jsonb_build_object(
      'event', 'thread.loop_broken', 'threadId', p.id, 'title', p.title,
      'pausedAt', to_char(p.paused_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
      'messages', ${rules.loopMessages}::int, 'windowMinutes', ${rules.loopWindowMinutes}::int))
    from paused p`;
  return rows.length > 0;
}
