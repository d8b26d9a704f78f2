import { afterEach, expect, test } from 'bun:test';
import { isDatabaseUnavailable } from '../src/db/unavailable';
import { openPlanKeepingConnection, type PlanKeepingConnection } from '../src/db/plan-keeping-connection';
import { owedDoorbell, owedPreparedAttempt, recordAttempt } from '../src/domain/deliveries/delivery-steps';
import { afterAttempt } from '../src/domain/deliveries/retry-policy';
import { createLogger } from '../src/log';
import { uniqueName, useHarness } from './support/harness';
import { freePort } from './support/ports';
import { post } from './support/webhooks';

// The two statements every doorbell sends run over connections that keep one plan each
// (db/plan-keeping-connection.ts): on the shared pool PostgreSQL planned them afresh at every call,
// which cost more than running them.
const h = useHarness();
const hook = 'http://127.0.0.1:9/plans';
const logLines: Record<string, unknown>[] = [];
const log = createLogger('info', (line) => logLines.push(JSON.parse(line)));
const opened: PlanKeepingConnection[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((c) => c.end()));
  logLines.length = 0;
});

async function open(url = h.db.url) {
  const connection = await openPlanKeepingConnection(url, 1, h.db.sql, log, 'test statement');
  opened.push(connection);
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

test("the doorbell's look-up is planned once on its connection, where the shared pool plans at every call", async () => {
  const deliveryId = await delivery();
  const connection = await open();
  // PostgreSQL's own rule makes the first five runs of a statement custom plans; ten show which
  // plan it keeps.
  for (let i = 0; i < 10; i++) expect(await owedPreparedAttempt(connection.sql(), deliveryId, 'another version')).toBeNull();
  expect(await plans(connection, 'with d as materialized (select * from deliveries where id = any')).toEqual([{ generic: 10, custom: 0 }]);
  const [shared] = await h.db.sql<{ mode: string }[]>`select current_setting('plan_cache_mode') as mode`;
  expect(shared!.mode).toBe('auto');
});

test("the attempt's record is planned once on its connection", async () => {
  const connection = await open();
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

test('a connection that closed keeps plans again on the one that replaces it', async () => {
  const connection = await open();
  const backend = () =>
    connection.sql()<{ pid: number; mode: string }[]>`select pg_backend_pid() as pid, current_setting('plan_cache_mode') as mode`;
  const [before] = await backend();
  expect(before!.mode).toBe('force_generic_plan');
  await h.db.sql`select pg_terminate_backend(${before!.pid})`;
  // The statements sent as the connection closes fail with it, the SET before them included (its
  // answer may be the closing backend's last word), and the first to reach the new connection
  // may have gone without it; the next one has it.
  let reached = false;
  for (let tries = 0; !reached && tries < 50; tries++) {
    try {
      reached = (await backend())[0]!.pid !== before!.pid;
    } catch (error) {
      expect(isDatabaseUnavailable(error)).toBe(true);
      await Bun.sleep(20);
    }
  }
  expect(reached).toBe(true);
  const [after] = await backend();
  expect(after!.pid).not.toBe(before!.pid);
  expect(after!.mode).toBe('force_generic_plan');
  expect(logLines).toEqual([]);
});

test('a connection that cannot open at the start leaves its statement on the shared pool', async () => {
  const nobody = `postgres://postgres@127.0.0.1:${await freePort()}/postgres`;
  const connection = await open(nobody);
  expect(connection.sql()).toBe(h.db.sql);
  expect(connection.kept).toBe(false);
  expect(logLines).toEqual([
    expect.objectContaining({
      level: 'warn',
      event: 'plan_keeping_connection_unavailable',
      purpose: 'test statement',
      fallback: 'the shared pool, planning at every call',
    }),
  ]);
});
