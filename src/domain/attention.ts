import type { Sql } from '../db/connect';
import { stalledSql } from './deliveries';

export type Attention = {
  failed: number;
  retrying: number;
  stalled: number;
  closeRequests: number;
  // When the next Notified delivery will read as stalled unless its report comes first, so that
  // an open page can look again then.
  nextStallAt: string | null;
};

// What waits for a person, shown in the dashboard's navigation on every page: by the rules the
// lists filter on, each count read from its own small partial index (sql/013), in one statement.
export async function attention(sql: Sql, stalledAfterMs: number): Promise<Attention> {
  const [row] = await sql`
    select (select count(*) from deliveries d where d.step = 'failed')::int as failed,
           (select count(*) from deliveries d where d.step = 'accepted' and d.next_attempt_at is not null)::int as retrying,
           (select count(*) from deliveries d where ${stalledSql(sql, stalledAfterMs)})::int as stalled,
           (select count(*) from threads where state = 'close-pending')::int as "closeRequests",
           (select min(d.notified_at) from deliveries d
             where d.step = 'notified' and d.delivered_at is null
               and d.notified_at >= now() - make_interval(secs => ${stalledAfterMs / 1000})) as "oldestAwaiting"`;
  const { oldestAwaiting, ...counts } = row!;
  return {
    ...(counts as Omit<Attention, 'nextStallAt'>),
    nextStallAt: oldestAwaiting ? new Date((oldestAwaiting as Date).getTime() + stalledAfterMs).toISOString() : null,
  };
}
