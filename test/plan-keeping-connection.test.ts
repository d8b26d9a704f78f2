import { afterAll, afterEach, beforeAll, expect, test } from 'bun:test';
import { batchedStatement } from '../src/db/batcher';
import { connect, type Sql } from '../src/db/connect';
import { planKeepingConnection, type PlanKeepingConnection } from '../src/db/plan-keeping-connection';
import { isDatabaseUnavailable } from '../src/db/unavailable';
import { owedDoorbell, owedPreparedAttempt, recordAttempt } from '../src/domain/deliveries/delivery-steps';
import { afterAttempt } from '../src/domain/deliveries/retry-policy';
import { createLogger } from '../src/log';
import { uniqueName, useHarness } from './support/harness';
import { pgGate } from './support/pg-gate';
import { freePort } from './support/ports';
import { eventually } from './support/receiver';
import { post } from './support/webhooks';

// The two statements every doorbell sends run over connections that keep one plan each
// (db/plan-keeping-connection.ts): on the shared pool PostgreSQL planned them afresh at every call,
// which cost more than running them.
const h = useHarness();
const hook = 'http://127.0.0.1:9/plans';
const logLines: Record<string, unknown>[] = [];
const log = createLogger('info', (line) => logLines.push(JSON.parse(line)));
const made: PlanKeepingConnection[] = [];
let gate: ReturnType<typeof pgGate>;
beforeAll(() => {
  gate = pgGate({ host: new URL(h.db.url).hostname, port: Number(new URL(h.db.url).port || 5432) });
});
afterEach(async () => {
  gate.open();
  await Promise.all(made.splice(0).map((c) => c.end()));
  logLines.length = 0;
});
afterAll(() => gate?.stop());

const PURPOSE = 'test statement';
function make(url = h.db.url) {
  const connection = planKeepingConnection(url, 1, h.db.sql, log, PURPOSE);
  made.push(connection);
  return connection;
}
async function opened(url?: string) {
  const connection = make(url);
  await connection.open();
  return connection;
}

async function delivery() {
  const sender = await h.agent(uniqueName('plans-sender'));
  const recipient = await h.agent(uniqueName('plans-hooked'), { webhookUrl: hook });
  return (await post(h, sender, recipient, { content: 'plan me' })).deliveryId;
}

// Plans of the statement whose text holds `marker`, as the connection's own session counts them.
async function plans(connection: PlanKeepingConnection, marker: string) {
  return [
    ...(await connection.sql()<{ generic: number; custom: number }[]>`
      select generic_plans::int as generic, custom_plans::int as custom from pg_prepared_statements
      where strpos(statement, ${marker}) > 0 and strpos(statement, 'pg_prepared_statements') = 0`),
  ];
}

const backend = (connection: PlanKeepingConnection) =>
  connection.sql()<{ pid: number; mode: string; name: string }[]>`
    select pg_backend_pid() as pid, current_setting('plan_cache_mode') as mode, current_setting('application_name') as name`;

test("the doorbell's look-up is planned once on its connection; the shared pool keeps PostgreSQL's own choice", async () => {
  const deliveryId = await delivery();
  const connection = await opened();
  // PostgreSQL's own rule makes the first five runs of a statement custom plans; ten show which
  // plan it keeps.
  for (let i = 0; i < 10; i++) expect(await owedPreparedAttempt(connection.sql(), deliveryId, 'another version')).toBeNull();
  expect(await plans(connection, 'with d as materialized (select * from deliveries where id = any')).toEqual([{ generic: 10, custom: 0 }]);
  const [shared] = await h.db.sql<{ mode: string }[]>`select current_setting('plan_cache_mode') as mode`;
  expect(shared!.mode).toBe('auto');
  expect((await backend(connection))[0]!.name).toBe(`agent-messaging-service: ${PURPOSE}`);
});

test("the attempt's record is planned once on its connection", async () => {
  const connection = await opened();
  for (let i = 0; i < 6; i++) {
    const deliveryId = await delivery();
    const owed = (await owedDoorbell(h.db.sql, deliveryId))!;
    const outcome = { status: 204, error: null };
    const endpoint = { agentId: owed.recipientId, webhookVersion: owed.webhookVersion, url: owed.url };
    const { publish, attempt, resend } = owed;
    const next = afterAttempt(outcome, attempt, { delaysMs: [50] });
    expect(await recordAttempt(connection.sql(), { deliveryId, endpoint, publish, attempt, resend, attemptedAt: new Date(), durationMs: 2, outcome, next })).toBe(false);
    const [row] = await h.db.sql<{ step: string; attempts: number }[]>`
      select step::text, (select count(*)::int from delivery_attempts where delivery_id = ${deliveryId}) as attempts
      from deliveries where id = ${deliveryId}`;
    expect(row).toEqual({ step: 'notified', attempts: 1 });
  }
  expect(await plans(connection, 'insert into delivery_attempts')).toEqual([{ generic: 6, custom: 0 }]);
});

test('after its connection closes, the statement goes to the shared pool until a new one is set', async () => {
  const connection = await opened();
  const [before] = await backend(connection);
  expect(before!.mode).toBe('force_generic_plan');
  await h.db.sql`select pg_terminate_backend(${before!.pid})`;
  await eventually(async () => connection.sql() === h.db.sql, 5_000);
  // Asking sets a new connection in the background; until it is set, the answer is the shared pool.
  await eventually(async () => connection.sql() !== h.db.sql, 5_000);
  const [after] = await backend(connection);
  expect(after!.pid).not.toBe(before!.pid);
  expect(after!.mode).toBe('force_generic_plan');
  expect(logLines).toEqual([]);
});

test('a connection that cannot open again while the shared pool answers leaves the statement to the shared pool', async () => {
  gate.admit(1);
  const connection = await opened(gate.url(h.db.url));
  const [before] = await backend(connection);
  expect(before!.name).toBe(`agent-messaging-service: ${PURPOSE}`);
  // Out of connections from here: the shared pool keeps those it has.
  await h.db.sql`select pg_terminate_backend(${before!.pid})`;
  await eventually(async () => connection.sql() === h.db.sql, 5_000);
  const deliveryId = await delivery();
  for (let i = 0; i < 5; i++) {
    expect(connection.sql()).toBe(h.db.sql);
    expect(await owedPreparedAttempt(connection.sql(), deliveryId, 'another version')).toBeNull();
    await Bun.sleep(300);
  }
  // Refusals are the database being away, not worth a warning: the statements went elsewhere.
  expect(logLines).toEqual([]);
  gate.open();
  await eventually(async () => connection.sql() !== h.db.sql, 5_000);
  const [after] = await backend(connection);
  expect([after!.mode, after!.name]).toEqual(['force_generic_plan', `agent-messaging-service: ${PURPOSE}`]);
});

test('at the start, a connection that cannot open fails the start as the database does', async () => {
  const nobody = `postgres://postgres@127.0.0.1:${await freePort()}/postgres`;
  const connection = make(nobody);
  const failed = await connection.open().then(
    () => null,
    (error: unknown) => error,
  );
  expect(isDatabaseUnavailable(failed)).toBe(true);
  expect((failed as { code?: string }).code).toBe('ECONNREFUSED');
  expect(connection.sql()).toBe(h.db.sql);

  gate.admit(0);
  const busy = make(gate.url(h.db.url));
  const refused = await busy.open().then(
    () => null,
    (error: unknown) => error,
  );
  expect((refused as { code?: string }).code).toBe('53300');
});

test('a batch that gets no answer in time fails as on a dropped connection, and a new connection replaces the lost one', async () => {
  const connection = planKeepingConnection(h.db.url, 1, h.db.sql, log, PURPOSE, 300);
  made.push(connection);
  await connection.open();
  const [before] = await backend(connection);
  const slept = batchedStatement(
    async (sql: Sql, seconds: number[]) => {
      const [row] = await sql<{ pid: number }[]>`select pg_backend_pid() as pid, pg_sleep(${seconds[0]!})::text`;
      return seconds.map(() => row!.pid);
    },
    { maxInFlight: 1 },
  );
  const never = slept(connection, 3);
  // Queued behind the one in flight, as every doorbell's look-up was behind a lost one.
  const next = slept(connection, 0);
  const failed = await never.then(
    () => null,
    (error: unknown) => error,
  );
  expect((failed as { code?: string }).code).toBe('STATEMENT_LOST');
  expect(isDatabaseUnavailable(failed)).toBe(true);
  expect(logLines).toEqual([expect.objectContaining({ level: 'warn', event: 'plan_keeping_connection_lost', purpose: PURPOSE, waitedMs: 300 })]);
  // The batch behind it went out at once, to the shared pool while a new connection is set.
  expect(await next).not.toBe(before!.pid);
  await eventually(async () => connection.sql() !== h.db.sql, 5_000);
  const [after] = await backend(connection);
  expect(after!.pid).not.toBe(before!.pid);
  expect(after!.mode).toBe('force_generic_plan');
  expect(await slept(connection, 0)).toBe(after!.pid);
});

test('a batch waiting behind the one in flight goes where the chooser points as it is sent', async () => {
  const pools = ['a', 'b'].map((name) => connect(h.db.url, 1, 5, { applicationName: `plan-keeping test ${name}` }));
  let current = pools[0]!;
  const chooser = { sql: () => current };
  const named = batchedStatement(
    async (sql: Sql, items: number[]) => {
      const [row] = await sql<{ name: string }[]>`select current_setting('application_name') as name, pg_sleep(0.1)::text`;
      return items.map(() => row!.name);
    },
    { maxInFlight: 1 },
  );
  try {
    const first = named(chooser, 1);
    const queued = [named(chooser, 2), named(chooser, 3)];
    current = pools[1]!;
    expect(await first).toBe('plan-keeping test a');
    expect(await Promise.all(queued)).toEqual(['plan-keeping test b', 'plan-keeping test b']);
  } finally {
    await Promise.all(pools.map((pool) => pool.end()));
  }
});
