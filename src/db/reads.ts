import type { Logger } from '../log';
import { connect, type Reads, type Sql } from './connect';
import { isDatabaseUnavailable } from './unavailable';

// Where the reads that may be a moment stale run (`Reads`, connect.ts): this module alone decides
// it, on DATABASE_REPLICA_URL while the replica answers, otherwise on the primary.

// Where reads that may lag go right now: `null` without a replica.
export type ReplicaState = { serving: boolean; since: string } | null;

export type ReplicaReads = Reads & {
  state: () => ReplicaState;
  // Reads that may lag served on each side since the start.
  served: () => { replica: number; primary: number };
  stop: () => Promise<void>;
};

// How often a replica that stopped answering is asked again.
const PROBE_EVERY_MS = 1_000;
// How long caughtUp() waits for the replica to replay what the primary has, asking this often: a
// replica further behind than that is read as it is.
const CATCH_UP_MS = 1_000;
const CATCH_UP_EVERY_MS = 10;

// Answers of a replica that is up but cannot serve this read, which the primary then serves:
// serialization_failure, when replaying the primary's changes had to cancel the read (a recovery
// conflict); undefined_table and undefined_column, when a new version's read reaches a replica
// that has not yet replayed the migration the primary ran for it.
const PRIMARY_INSTEAD = new Set(['40001', '42P01', '42703']);

export function replicaReads(
  primary: Sql,
  replicaUrl: string,
  { poolSize, connectTimeoutS, options }: { poolSize: number; connectTimeoutS: number; options: Parameters<typeof connect>[3] },
  log: Logger,
): ReplicaReads {
  const replica = connect(replicaUrl, poolSize, connectTimeoutS, options);
  let serving = true;
  let since = new Date();
  let probe: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
  const served = { replica: 0, primary: 0 };

  // Logged once per change, whichever read or probe noticed it first.
  const fallBack = (error: unknown) => {
    if (!serving || stopped) return;
    serving = false;
    since = new Date();
    log.warn('replica_unavailable', { error: (error as Error).message, readsOn: 'primary' });
    probe = setTimeout(askAgain, PROBE_EVERY_MS);
  };
  const askAgain = async () => {
    const answered = await replica`select 1`.then(
      () => true,
      () => false,
    );
    if (stopped) return;
    if (!answered) return void (probe = setTimeout(askAgain, PROBE_EVERY_MS));
    serving = true;
    since = new Date();
    log.info('replica_serving', { readsOn: 'replica' });
  };

  return {
    async mayLag(read) {
      if (serving) {
        try {
          const answer = await read(replica);
          served.replica++;
          return answer;
        } catch (error) {
          const unavailable = isDatabaseUnavailable(error);
          if (!unavailable && !PRIMARY_INSTEAD.has((error as { code?: unknown }).code as string)) throw error;
          if (unavailable) fallBack(error);
        }
      }
      served.primary++;
      return read(primary);
    },
    async caughtUp() {
      if (!serving) return;
      const deadline = performance.now() + CATCH_UP_MS;
      try {
        const [{ lsn }] = (await primary`select pg_current_wal_lsn()::text as lsn`) as unknown as [{ lsn: string }];
        for (;;) {
          const [row] = await replica<{ replayed: boolean }[]>`select coalesce(pg_last_wal_replay_lsn() >= ${lsn}::pg_lsn, true) as replayed`;
          if (row!.replayed || performance.now() > deadline) return;
          await Bun.sleep(CATCH_UP_EVERY_MS);
        }
      } catch {
        // Either server away: the page reads again now, from wherever its reads go.
      }
    },
    state: () => ({ serving, since: since.toISOString() }),
    served: () => ({ ...served }),
    stop: async () => {
      stopped = true;
      clearTimeout(probe);
      await replica.end({ timeout: 5 });
    },
  };
}
