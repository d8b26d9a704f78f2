import { afterAll, expect, test } from 'bun:test';
import type { Sql } from '../src/db/connect';
import { doorbellStatementsPool } from '../src/db/worker-pool';
import { owedPreparedAttempt } from '../src/domain/deliveries/delivery-steps';
import { useHarness } from './support/harness';
import { receiver } from './support/receiver';

// The look-up every doorbell sends runs over connections that keep one plan for it
// (db/worker-pool.ts): PostgreSQL planned it afresh at every call on the pool's own connections,
// which cost ten times its execution.
const h = useHarness();
const hook = receiver();
let pool: Sql | undefined;
afterAll(async () => {
  await pool?.end();
});

test("the doorbell's look-up is planned once on its connections, not at every call", async () => {
  const sender = await h.agent('plans-sender');
  const recipient = await h.agent('plans-recipient', { webhookUrl: hook.url('/plans') });
  const threadId = await h.thread(sender, [recipient]);
  const { id: messageId } = await h.post(sender, threadId, 'plan me');
  const [delivery] = await h.db.sql<{ id: string }[]>`select id from deliveries where message_id = ${messageId}`;

  pool = doorbellStatementsPool(h.db.url, h.config);
  const connection = await pool.reserve();
  try {
    // PostgreSQL's own rule makes the first five runs of a statement custom plans; ten show which
    // plan it keeps after them.
    for (let i = 0; i < 10; i++) await owedPreparedAttempt(connection as unknown as Sql, delivery!.id, 'any version');
    const plans = await connection<{ generic: number; custom: number }[]>`
      select generic_plans::int as generic, custom_plans::int as custom from pg_prepared_statements
      where statement like '%with d as materialized (select * from deliveries where id = any%'
        and statement not like '%pg_prepared_statements%'`;
    expect([...plans]).toEqual([{ generic: 10, custom: 0 }]);
  } finally {
    connection.release();
  }
});
