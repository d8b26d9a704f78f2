import type { PendingQuery, Row } from 'postgres';
import type { Queries, Reads, TransactionSql } from '../../db/connect';
import { isStatementStopped } from '../../db/unavailable';
import { settlesWithin } from '../../settles-within';
import { ClientLeft, invalid, rateLimited } from './errors';

// Searches are the reads whose cost the caller's words decide: a common word in a large history
// ranks every match before the first page is known. So each search runs under three bounds, for
// agents (GET /api/messages/search, search_messages) and people (the dashboard's search boxes)
// alike, so that one caller's searches cannot slow anyone else's inbox:
// - time: every statement of a search ends within `timeoutMs` (PostgreSQL's statement_timeout),
//   and the caller is told to narrow it;
// - presence: a search whose caller has gone (the request aborted) is cancelled in the database;
// - share of the pool: at most `concurrency` searches hold a connection at once in a process, a
//   caller at most PER_CALLER of them, and a search waits for a turn no longer than its time bound.
export type SearchBounds = { timeoutMs: number; concurrency: number };

// Searches one caller may have under way or waiting at once.
export const PER_CALLER = 2;

// Searches waiting for a turn, per allowed at once: past that, a search is refused at once rather
// than held while the database falls behind.
const QUEUED_PER_SLOT = 8;

export const searchTooSlow = (timeoutMs: number) =>
  `The search took longer than ${timeoutMs / 1000} s and was stopped: narrow it with more words, a "phrase" or a threadId.`;
export const SEARCHES_UNDER_WAY = `You have ${PER_CALLER} searches under way; wait for one to answer before starting another.`;

// Refused before it started: the process is searching as much as it may (503, retry in a moment).
export class SearchesBusy extends Error {
  constructor() {
    super('The service is busy with other searches. Retry in a moment.');
  }
}

export type SearchGate = {
  // Runs `read` in one read-only transaction under the bounds above. `caller` names who searches
  // (an agent's or a person's id); `abort` is the request's signal.
  run<T>(caller: string, abort: AbortSignal | undefined, read: (tx: TransactionSql) => Promise<T>): Promise<T>;
  // Searches holding a connection, and waiting for one.
  load(): { running: number; waiting: number };
  // Where searches run (they may lag: db/reads.ts), for reads that search only sometimes (searchingIf).
  reads: Reads;
};

// A list read that searches when it is given words (the dashboard's lists with a search box) runs
// under the bounds; without words it is a page read through an index and runs as it is.
export function searchingIf<T>(gate: SearchGate, words: string | null, caller: string, abort: AbortSignal, read: (sql: Queries) => Promise<T>): Promise<T> {
  return words === null ? gate.reads.mayLag(read) : gate.run(caller, abort, read);
}

type Turn = { start: () => void; refuse: (error: Error) => void };

export function searchGate(reads: Reads, bounds: SearchBounds): SearchGate {
  let running = 0;
  const waiting: Turn[] = [];
  const perCaller = new Map<string, number>();

  const leave = (caller: string) => {
    const n = perCaller.get(caller)! - 1;
    if (n === 0) perCaller.delete(caller);
    else perCaller.set(caller, n);
  };
  const release = () => {
    running--;
    const next = waiting.shift();
    if (next) {
      running++;
      next.start();
    }
  };

  // A turn within the time bound, or a refusal; given up (without a turn) when the client leaves.
  const turn = (abort: AbortSignal | undefined) =>
    new Promise<void>((resolve, reject) => {
      if (running < bounds.concurrency) {
        running++;
        return resolve();
      }
      if (waiting.length >= bounds.concurrency * QUEUED_PER_SLOT) return reject(new SearchesBusy());
      const done = () => {
        clearTimeout(timer);
        abort?.removeEventListener('abort', gone);
      };
      const me: Turn = {
        start: () => {
          done();
          resolve();
        },
        refuse: (error) => {
          done();
          waiting.splice(waiting.indexOf(me), 1);
          reject(error);
        },
      };
      const timer = setTimeout(() => me.refuse(new SearchesBusy()), bounds.timeoutMs);
      const gone = () => me.refuse(new ClientLeft());
      abort?.addEventListener('abort', gone, { once: true });
      waiting.push(me);
    });

  return {
    async run<T>(caller: string, abort: AbortSignal | undefined, read: (tx: TransactionSql) => Promise<T>): Promise<T> {
      if (abort?.aborted) throw new ClientLeft();
      const mine = perCaller.get(caller) ?? 0;
      if (mine >= PER_CALLER) throw rateLimited(SEARCHES_UNDER_WAY);
      perCaller.set(caller, mine + 1);
      try {
        await turn(abort);
        try {
          return (await reads.mayLag((sql) => sql.begin('read only', async (tx) => {
            // Planned for the words asked each time: a generic plan (after five runs of a prepared
            // statement) would serve a rare word and a common one alike, and for a common word
            // read every match in the table instead of the caller's threads.
            await tx`select set_config('statement_timeout', ${String(bounds.timeoutMs)}, true),
                            set_config('plan_cache_mode', 'force_custom_plan', true)`;
            return cancelledWith(abort, tx, read);
          }))) as T;
        } catch (error) {
          if (isStatementStopped(error)) throw invalid(searchTooSlow(bounds.timeoutMs), 'q');
          throw error;
        } finally {
          release();
        }
      } finally {
        leave(caller);
      }
    },
    load: () => ({ running, waiting: waiting.length }),
    reads,
  };
}

// Runs `read` on a transaction whose statements are cancelled in the database when `abort` fires.
// A cancel names a backend, not a statement, and PostgreSQL acts on it only while a statement runs:
// so only the statement running at that moment is cancelled, none is started after it, and the
// transaction does not end (its connection is not handed to anyone else) until the cancel has been
// delivered.
async function cancelledWith<T>(abort: AbortSignal | undefined, tx: TransactionSql, read: (tx: TransactionSql) => Promise<T>): Promise<T> {
  if (!abort) return read(tx);
  const made: Running[] = [];
  const cancels: Promise<unknown>[] = [];
  const watched = new Proxy(tx, {
    apply(target, self, args) {
      if (abort.aborted) throw new ClientLeft();
      const query = Reflect.apply(target, self, args) as Running;
      // Fragments and helpers are made the same way; only a statement sent is ever active.
      if (typeof query?.cancel === 'function') made.push(query);
      return query;
    },
  });
  const cancel = () => {
    for (const query of made) if (query.active) cancels.push(Promise.resolve(query.cancel()).catch(() => {}));
  };
  abort.addEventListener('abort', cancel, { once: true });
  try {
    return await read(watched);
  } catch (error) {
    throw abort.aborted ? new ClientLeft() : error;
  } finally {
    abort.removeEventListener('abort', cancel);
    await settlesWithin(Promise.all(cancels), CANCEL_DELIVERY_MS);
  }
}

// postgres.js marks the statement it has sent and not yet had answered as active.
type Running = PendingQuery<Row[]> & { active?: boolean };

// A cancel is a connection of its own to PostgreSQL; one that cannot be made in this long (the
// database away) is given up, and the statement ends at its time bound instead.
const CANCEL_DELIVERY_MS = 2_000;
