import { afterAll, beforeAll, expect, test } from 'bun:test';
import { connect, type Sql } from '../src/db/connect';
import { createTestDatabase } from './support/database';

// patches/postgres@3.4.9.patch: a query goes to the connection that went idle last, not to the one
// idle longest. At a low rate the same few backends answer, still scheduled and warm, instead of
// every connection the pool opened under an earlier burst taking its turn (docs/internals/performance-history.md,
// "Warm connections after a burst").
let database: Awaited<ReturnType<typeof createTestDatabase>>;
let sql: Sql;
beforeAll(async () => {
  database = await createTestDatabase();
  sql = connect(database.url, 4);
});
afterAll(async () => {
  await sql.end();
  await database.drop();
});

test('after a burst opened every connection, queries one at a time go to the one used last', async () => {
  const burst = await Promise.all(
    Array.from({ length: 4 }, () => sql<{ pid: number }[]>`select pg_backend_pid() as pid, pg_sleep(0.05)`),
  );
  expect(new Set(burst.map(([row]) => row!.pid)).size).toBe(4);
  const pids: number[] = [];
  for (let i = 0; i < 8; i++) {
    const [row] = await sql<{ pid: number }[]>`select pg_backend_pid() as pid`;
    pids.push(row!.pid);
  }
  expect(new Set(pids).size).toBe(1);
});
