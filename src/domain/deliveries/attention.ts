import type { Sql } from '../../db/connect';
import { awaitingReportSql, retryingSql, stalledSql, stallsAt } from './delivery-states';

export type Attention = {
  failed: number;
  retrying: number;
  stalled: number;
  closeRequests: number;
  // Messages waiting for a person's approval, and threads the loop breaker paused.
  waiting: number;
  paused: number;
  // When the next Notified delivery will read as stalled unless its report comes first, so that
  // an open page can look again then.
  nextStallAt: string | null;
};

// What waits for a person, shown in the dashboard's navigation on every page: by the rules the
// lists filter on, each count read from its own small partial index (sql/013, sql/025, sql/026), in
// one statement.
export async function attention(sql: Sql, stalledAfterMs: number): Promise<Attention> {
  const [row] = await sql<(Omit<Attention, 'nextStallAt'> & { oldestAwaiting: Date | null })[]>`
    select (select count(*) from deliveries d where d.step = 'failed')::int as failed,
           (select count(*) from deliveries d where ${retryingSql(sql)})::int as retrying,
           (select count(*) from deliveries d where ${stalledSql(sql, stalledAfterMs)})::int as stalled,
           (select count(*) from threads where state = 'close-pending')::int as "closeRequests",
           (select count(*) from held_messages where state = 'held')::int as waiting,
           (select count(*) from threads where paused_at is not null)::int as paused,
           (select min(d.notified_at) from deliveries d where ${awaitingReportSql(sql, stalledAfterMs)}) as "oldestAwaiting"`;
  const { oldestAwaiting, ...counts } = row!;
  return {
    ...counts,
    nextStallAt: stallsAt({ step: 'notified', notifiedAt: oldestAwaiting, deliveredAt: null }, stalledAfterMs)?.toISOString() ?? null,
  };
}
