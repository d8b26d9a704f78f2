import type { Sql } from './connect';
import { isDatabaseUnavailable } from './unavailable';

// Lets concurrent callers share one statement. A statement costs the database far more than the
// rows it writes (planning, locks, executor start-up, the commit and its WAL flush, a round trip),
// so under load many small writes are cheaper as one. An item is sent at once while fewer than
// `maxInFlight` statements are running, so a quiet service adds no wait; otherwise it waits for
// the next statement, which takes everything queued meanwhile (up to `maxBatch` items).
//
// A statement that fails for a reason other than the database being away is run again one item at
// a time, so that one bad item cannot fail the others with it.
export type BatchOptions = {
  maxInFlight: number;
  maxBatch: number;
  // Items waiting for a statement, at most: beyond it an item is refused at once (Overloaded)
  // rather than held in memory while the database falls further behind.
  maxQueued?: number;
  // Errors that would fail each item alone just the same (the database is unavailable, say).
  sharedFailure: (error: unknown) => boolean;
  // Whether an item waits for the end of the event loop's turn before a statement is sent, so that
  // callers arriving together (the jobs of a batch fetched at once) share the first statement
  // rather than the first going alone and the rest in the next.
  gather?: boolean;
};

export class Overloaded extends Error {
  constructor() {
    super('The service is busy: too many writes are waiting for the database. Retry in a moment.');
  }
}

type Waiting<I, O> = { item: I; resolve: (value: O) => void; reject: (error: unknown) => void };

export function batcher<I, O>(run: (items: I[]) => Promise<O[]>, options: BatchOptions): (item: I) => Promise<O> {
  const queue: Waiting<I, O>[] = [];
  let inFlight = 0;

  const runAlone = (w: Waiting<I, O>) => run([w.item]).then(([out]) => w.resolve(out!), w.reject);

  const flush = () => {
    while (queue.length > 0 && inFlight < options.maxInFlight) {
      const batch = queue.splice(0, options.maxBatch);
      inFlight++;
      run(batch.map((w) => w.item))
        .then(
          (outs) => batch.forEach((w, i) => w.resolve(outs[i]!)),
          (error) => {
            if (batch.length === 1 || options.sharedFailure(error)) batch.forEach((w) => w.reject(error));
            else return Promise.all(batch.map(runAlone));
          },
        )
        .finally(() => {
          inFlight--;
          flush();
        });
    }
  };

  const maxQueued = options.maxQueued ?? Number.POSITIVE_INFINITY;
  let gathering = false;
  const gatherThenFlush = () => {
    if (gathering) return;
    gathering = true;
    setImmediate(() => {
      gathering = false;
      flush();
    });
  };
  return (item) =>
    new Promise<O>((resolve, reject) => {
      if (queue.length >= maxQueued) return reject(new Overloaded());
      queue.push({ item, resolve, reject });
      if (options.gather) gatherThenFlush();
      else flush();
    });
}

// Where a batched statement goes: a pool, or a chooser asked as each batch is sent, since the pool it
// answers with may change while items wait (plan-keeping-connection.ts hands its statement to the
// shared pool while its own connection is away). A chooser may also bound how long a batch waits
// for its answer (`answerWithinMs`): past it, the batch fails as if its connection had dropped,
// and the chooser is told the connection it went to is lost (`lost`).
export type StatementPool = Sql | { sql: () => Sql; answerWithinMs?: number; lost?: (sql: Sql) => void };

// A batch that never answered: its callers treat it as a dropped connection (unavailable.ts).
export class StatementLost extends Error {
  readonly code = 'STATEMENT_LOST';
  constructor(ms: number) {
    super(`A statement got no answer within ${ms} ms; its connection is taken for lost.`);
  }
}

// `sent`, or StatementLost once `ms` pass without an answer (then `onLost`). An answer that comes
// after is dropped.
function answeredWithin<T>(sent: Promise<T>, ms: number, onLost: () => void): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const lost = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      onLost();
      reject(new StatementLost(ms));
    }, ms);
  });
  sent.catch(() => {});
  return Promise.race([sent, lost]).finally(() => clearTimeout(timer));
}

// A statement that writes for many callers, batched per connection pool. Two statements in flight
// (unless `maxInFlight` says otherwise) let one commit's WAL flush overlap the next statement's
// work and leave the rest of the pool to reads; more in flight made smaller batches and fewer
// posts per second (bench: 4 827/s with two, 3 871/s with four, same machine).
export function batchedStatement<I, O>(
  run: (sql: Sql, items: I[]) => Promise<O[]>,
  { maxQueued, maxInFlight = 2, gather = false }: { maxQueued?: number; maxInFlight?: number; gather?: boolean } = {},
): (pool: StatementPool, item: I) => Promise<O> {
  const perPool = new WeakMap<StatementPool, (item: I) => Promise<O>>();
  return (pool, item) => {
    let send = perPool.get(pool);
    if (!send) {
      const sqlNow = typeof pool === 'function' ? () => pool : pool.sql;
      const within = typeof pool === 'function' ? undefined : pool.answerWithinMs;
      const statement = (items: I[]) => {
        const target = sqlNow();
        const sent = run(target, items);
        if (within === undefined || typeof pool === 'function') return sent;
        return answeredWithin(sent, within, () => pool.lost?.(target));
      };
      send = batcher(statement, { maxInFlight, maxBatch: 64, maxQueued, sharedFailure: isDatabaseUnavailable, gather });
      perPool.set(pool, send);
    }
    return send(item);
  };
}
