import type { Sql } from '../../db/connect';
import { retryingSql, stalledSql } from './delivery-states';
import type { DeliveryStep } from '../shared/schemas';

export type DeliveryCounts = {
  byStep: Record<DeliveryStep, number>;
  stalled: number;
  retrying: number;
};

// How many deliveries are at each step, and how many of them are stalled or waiting for a retry,
// by the same rules the dashboard filters on. One statement, so the figures agree with each other.
export async function countDeliveries(sql: Sql, stalledAfterMs: number): Promise<DeliveryCounts> {
  const [row] = await sql<(DeliveryCounts['byStep'] & { stalled: number; retrying: number })[]>`
    select count(*) filter (where d.step = 'accepted')::int as accepted,
           count(*) filter (where d.step = 'notified')::int as notified,
           count(*) filter (where d.step = 'delivered')::int as delivered,
           count(*) filter (where d.step = 'fetched')::int as fetched,
           count(*) filter (where d.step = 'failed')::int as failed,
           count(*) filter (where ${stalledSql(sql, stalledAfterMs)})::int as stalled,
           count(*) filter (where ${retryingSql(sql)})::int as retrying
    from deliveries d`;
  const { stalled, retrying, ...byStep } = row!;
  return { byStep, stalled, retrying };
}
