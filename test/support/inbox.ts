import type { Sql } from '../../src/db/connect';
import { eventually } from './receiver';

// The inbox query, picked out of pg_stat_activity by a column name only it reads.
const isInboxLook = `query ilike '%"alreadyRead"%'`;

// A bounded wait subscribes to wake-ups, then looks at the inbox once before it waits. A post that
// commits before that look has read the inbox is simply found by it: the wait answers without
// ever being woken, and a test of the wake-up passes without testing it. This starts a wait with
// its look held up by a lock on deliveries, sees the look waiting there (so the wait has
// subscribed), lets it through, and returns once it has read the inbox. A post made after that
// can reach the wait only by waking it. `sql` is a pool on the wait's database with two
// connections to spare: one holds the lock while the other watches.
export async function parkedWait<T>(sql: Sql, start: () => Promise<T>): Promise<{ answer: Promise<T> }> {
  const lock = await sql.reserve();
  let answer: Promise<T>;
  let pid: number;
  try {
    await lock`begin`;
    await lock`lock table deliveries in access exclusive mode`;
    answer = start();
    pid = await eventually(async () => {
      const [look] = await sql.unsafe(`
        select pid from pg_stat_activity
        where datname = current_database() and wait_event_type = 'Lock' and ${isInboxLook}`);
      return look?.pid as number | undefined;
    }).catch(() => {
      throw new Error('No look at the inbox was seen within 5 s: the wait did not start, or nothing made it look.');
    });
    await lock`commit`;
  } catch (error) {
    await lock`rollback`.catch(() => {});
    throw error;
  } finally {
    lock.release();
  }
  // Asked from the look's own connection (the pool hands out the one idle last), this query would
  // find itself: active, on that pid, naming the column.
  await eventually(async () => {
    const running = await sql.unsafe(
      `select 1 from pg_stat_activity where pid = $1 and pid <> pg_backend_pid() and state = 'active' and ${isInboxLook}`,
      [pid],
    );
    return running.length === 0;
  });
  return { answer };
}
