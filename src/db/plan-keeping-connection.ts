import type { Logger } from '../log';
import { connect, type Sql } from './connect';
import { isDatabaseUnavailable } from './unavailable';

// A connection of its own for one statement that a busy worker sends many times a second, on which
// PostgreSQL plans it once and keeps the plan. On the shared pool it kept custom plans for the two
// statements every doorbell sends (delivery-steps.ts: the "still owed?" look-up and the attempt's
// record), planning them afresh at every call, because a custom plan knows how many ids the batch
// holds and the generic one guesses, so looks dearer than it is: 0.28 and 0.8 ms of planning against
// 0.03 and 0.41 ms of work (docs/internals/performance-history.md, "Plans kept for the doorbell's statements"). Not
// for the whole pool, whose other statements keep PostgreSQL's own choice; the inbox read gets its
// one plan by hiding its values from the planner instead (domain/deliveries/inbox.ts).
//
// The setting goes out as a SET, which also opens the connection, rather than as a startup
// parameter, which PgBouncer refuses. One connection, since the statement has one call in flight.
// A batch of the statement goes there only once the SET has been answered on it (the batcher asks
// as it sends each batch, db/batcher.ts); while the connection is closed, opening again or refused
// (the database out of connections), batches go to the shared pool. So the connection makes no
// batch wait for it to reopen, and one whose doorbells the worker runs again after the shared
// pool said the database was back does not fail on it again.
//
// A batch that gets no answer within ANSWER_WITHIN_MS takes the connection for lost: a statement
// sent on it as the database restarted once never settled, though the connection was gone, and
// the statement's one batch in flight held every later doorbell (test-faults/
// batched-drain-restart.test.ts). The batch fails as on a dropped connection (its doorbells run
// again), and a fresh connection replaces the lost one, the shared pool serving meanwhile.
export type PlanKeepingConnection = {
  // Where to send a batch of the statement now.
  sql: () => Sql;
  answerWithinMs: number;
  // The connection `sql` answered with never answered: replaced.
  lost: (sql: Sql) => void;
  // At the start: opens the connection and sets it, failing as the database does, so that a start
  // waits while the database is out of connections as for its other connections.
  open: () => Promise<void>;
  end: () => Promise<void>;
};

// A SET that failed (its connection refused, say) is tried again no sooner than this.
const SET_AGAIN_AFTER_MS = 1_000;

// Far beyond what the doorbell statements take (milliseconds; a large batch under load, well under
// a second), and short of graphile-worker's and the test's patience.
const ANSWER_WITHIN_MS = 20_000;

export function planKeepingConnection(
  url: string,
  connectTimeoutSeconds: number,
  shared: Sql,
  log: Logger,
  purpose: string,
  answerWithinMs = ANSWER_WITHIN_MS,
): PlanKeepingConnection {
  // Bumped by every close, so that a SET answered for a connection that is gone settles nothing.
  let generation = 0;
  let state: 'unset' | 'setting' | 'set' | 'ended' = 'unset';
  let setting: Promise<void> | null = null;
  let notBefore = 0;
  const forget = () => {
    generation++;
    if (state === 'ended') return;
    state = 'unset';
    setting = null;
  };
  const open = (): Sql => {
    const opened: Sql = connect(url, 1, connectTimeoutSeconds, {
      // Seen in pg_stat_activity beside the pool's connections.
      applicationName: `agent-messaging-service: ${purpose}`,
      // Not replaced after a while as the pool's are: a replacement would hold the batches sent
      // meanwhile until it opened, and run the first of them unset.
      maxLifetime: null,
      onclose: () => {
        if (opened === own) forget();
      },
    });
    return opened;
  };
  let own = open();
  const set = () => {
    const sent = generation;
    const current = () => sent === generation && state === 'setting';
    state = 'setting';
    setting = own`set plan_cache_mode = force_generic_plan`.then(
      () => {
        if (current()) state = 'set';
      },
      (error: unknown) => {
        // Even when a close got here first (a connection closed while opening): the next try waits.
        notBefore = performance.now() + SET_AGAIN_AFTER_MS;
        if (current()) {
          state = 'unset';
          setting = null;
        }
        throw error;
      },
    );
    return setting;
  };
  return {
    sql: () => {
      if (state === 'set') return own;
      if (state === 'unset' && performance.now() >= notBefore) {
        set().catch((error: unknown) => {
          if (!isDatabaseUnavailable(error)) log.warn('plan_keeping_failed', { purpose, error: (error as Error).message });
        });
      }
      return shared;
    },
    answerWithinMs,
    lost: (sql) => {
      if (sql !== own || state === 'ended') return;
      log.warn('plan_keeping_connection_lost', { purpose, waitedMs: answerWithinMs });
      const gone = own;
      own = open();
      forget();
      gone.end({ timeout: 0 }).catch(() => {});
    },
    open: async () => {
      if (state !== 'set') await (setting ?? set());
    },
    // Statements still running then (a stop that gave up waiting for its jobs) go to the shared
    // pool, which closes last.
    end: () => {
      state = 'ended';
      return own.end({ timeout: 5 });
    },
  };
}
