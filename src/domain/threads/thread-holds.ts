import type { Queries, Sql } from '../../db/connect';
import { recordDecision, type Decider } from '../people/audit';
import { invalid, notFound } from '../shared/errors';
import { isId } from '../shared/ids';

// What people set about one thread (docs/guides/govern-agents.md): whether every agent's message in
// it waits for a person, and taking it out of the loop breaker's pause. The post path enforces
// both; each change here is recorded in the audit trail in the transaction that makes it.

export type ThreadHolds = { id: string; holdsMessages: boolean; pausedAt: string | null };

const NO_SUCH_THREAD = 'No such thread.';

type Locked = { holdsMessages: boolean; pausedAt: Date | null };

async function lockThread(tx: Queries, threadId: string): Promise<Locked> {
  if (!isId(threadId)) throw notFound(NO_SUCH_THREAD);
  const [row] = await tx<Locked[]>`
    select holds_messages as "holdsMessages", paused_at as "pausedAt" from threads where id = ${threadId} for update`;
  if (!row) throw notFound(NO_SUCH_THREAD);
  return row;
}

// A setting saved unchanged decides nothing and records nothing.
export async function setThreadHolds(sql: Sql, decider: Decider, threadId: string, holds: unknown): Promise<ThreadHolds> {
  if (typeof holds !== 'boolean') throw invalid('holds must be true or false', 'holds');
  return sql.begin(async (tx) => {
    const before = await lockThread(tx, threadId);
    if (before.holdsMessages !== holds) {
      await tx`update threads set holds_messages = ${holds} where id = ${threadId}`;
      await recordDecision(tx, decider, {
        action: 'thread.holds.set',
        subjectType: 'thread',
        subject: threadId,
        before: { holdsMessages: before.holdsMessages },
        after: { holdsMessages: holds },
      });
    }
    return { id: threadId, holdsMessages: holds, pausedAt: before.pausedAt?.toISOString() ?? null };
  });
}

// The loop breaker counts again from now, so that the messages that tripped it do not trip it at
// the next post. Messages held while the thread was paused are not decided by resuming: they wait
// for a person's yes or no like any other held message.
export async function resumeThread(sql: Sql, decider: Decider, threadId: string): Promise<ThreadHolds & { loopCountedFrom: string }> {
  return sql.begin(async (tx) => {
    const before = await lockThread(tx, threadId);
    if (!before.pausedAt) throw invalid('The thread is not paused: only a thread the loop breaker paused can be resumed.');
    const [row] = await tx<{ loopCountedFrom: Date }[]>`
      update threads set paused_at = null, loop_counted_from = now() where id = ${threadId}
      returning loop_counted_from as "loopCountedFrom"`;
    const loopCountedFrom = row!.loopCountedFrom.toISOString();
    await recordDecision(tx, decider, {
      action: 'thread.resume',
      subjectType: 'thread',
      subject: threadId,
      before: { pausedAt: before.pausedAt.toISOString() },
      after: { pausedAt: null, loopCountedFrom },
    });
    return { id: threadId, holdsMessages: before.holdsMessages, pausedAt: null, loopCountedFrom };
  });
}
