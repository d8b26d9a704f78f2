import type { Logger } from '../log';
import { connect, type Sql } from './connect';
import { isDatabaseUnavailable } from './unavailable';

// A connection of its own for one statement that a busy worker sends many times a second, on which
// PostgreSQL plans it once and keeps the plan. On the shared pool it kept custom plans for the two
// statements every doorbell sends (delivery-steps.ts: the "still owed?" look-up and the attempt's
// record), planning them afresh at every call, because a custom plan knows how many ids the batch
// holds and the generic one guesses, so looks dearer than it is: 0.28 and 0.8 ms of planning against
// 0.03 and 0.41 ms of work (docs/performance.md, "Plans kept for the doorbell's statements"). Not
// for the whole pool: the inbox read needs its custom plan (test/inbox-plan.test.ts).
//
// The setting goes out as a SET ahead of the first statement of every connection, not as a startup
// parameter, which PgBouncer refuses. One connection, since the statement has one call in flight:
// the SET and the statements after it share it. Once it closes, or a SET fails, the next statement
// is preceded by a SET again; a statement that went without one is planned as on the shared pool.
export type PlanKeepingConnection = {
  // The pool to send the statement to now; its plan is kept from here on.
  sql: () => Sql;
  // False when it did not open and the statement goes to the shared pool.
  kept: boolean;
  end: () => Promise<void>;
};

// Opened and checked at the start. Should it not open (the database out of connections, say), the
// statement goes to `shared` with PostgreSQL's usual planning: slower, the same in every other way.
export async function openPlanKeepingConnection(
  url: string,
  connectTimeoutSeconds: number,
  shared: Sql,
  log: Logger,
  purpose: string,
): Promise<PlanKeepingConnection> {
  // Bumped by every close, so that a SET answered for a connection that is gone settles nothing.
  let generation = 0;
  let state: 'unset' | 'setting' | 'set' = 'unset';
  const own = connect(url, 1, connectTimeoutSeconds, {
    onclose: () => {
      generation++;
      state = 'unset';
    },
  });
  // Sent ahead of the statement, on the one connection, so it is in force when the statement is
  // planned. PostgreSQL 13 and later, all this service runs on, let any role set it; one that
  // failed is sent again before the next statement.
  const sql = () => {
    if (state !== 'unset') return own;
    const sent = generation;
    state = 'setting';
    own`set plan_cache_mode = force_generic_plan`.then(
      () => {
        if (sent === generation) state = 'set';
      },
      (error: unknown) => {
        if (sent !== generation) return;
        state = 'unset';
        if (!isDatabaseUnavailable(error)) log.warn('plan_keeping_failed', { purpose, error: (error as Error).message });
      },
    );
    return own;
  };
  try {
    await sql()`select 1`;
  } catch (error) {
    log.warn('plan_keeping_connection_unavailable', {
      purpose,
      error: (error as Error).message,
      fallback: 'the shared pool, planning at every call',
    });
    await own.end({ timeout: 0 }).catch(() => {});
    return { sql: () => shared, kept: false, end: async () => {} };
  }
  return { sql, kept: true, end: () => own.end() };
}
