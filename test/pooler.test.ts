import { afterAll, beforeAll, expect, test } from 'bun:test';
import { call, startService, type Service } from '../test-faults/support/service';
import { track } from './support/children';
import { testDatabase, type TestDatabase } from './support/database';
import { eventReader } from './support/events';
import { startPgBouncer, type PgBouncer } from './support/pgbouncer';
import { eventually, receiver } from './support/receiver';

// The service behind PgBouncer in transaction mode, both real processes: requests and jobs through
// the pooler, what needs a session (LISTEN, migrations) on DATABASE_DIRECT_URL (src/db/pooler.ts).
const BOUNCER_PORT = 55451;
const BOUNCER_POOL = 4;
const DROPPING_PORT = 55453;
const METRICS_TOKEN = 'pooler-test-metrics-token';
let db: TestDatabase;
let bouncer: PgBouncer;
let service: Service | undefined;
let env: Record<string, string>;
beforeAll(async () => {
  db = await testDatabase();
  bouncer = await startPgBouncer(db.url, { port: BOUNCER_PORT, poolSize: BOUNCER_POOL });
  // Pools larger than PgBouncer's, so that the count of PostgreSQL's connections below shows who
  // holds them.
  env = { DATABASE_URL: bouncer.url, DATABASE_DIRECT_URL: db.url, DB_POOL_SIZE: '10', WEBHOOK_CONCURRENCY: '4', METRICS_TOKEN };
});
afterAll(async () => {
  await service?.stop();
  await bouncer?.stop();
  await db?.drop();
});

async function run(args: string[], extra: Record<string, string> = {}) {
  const proc = track(
    Bun.spawn(['bun', 'src/main.ts', ...args], {
      env: { ...process.env, ...env, LOG_LEVEL: 'error', PORT: '0', HOST: '127.0.0.1', ...extra },
      stdin: 'ignore',
      stdout: 'pipe',
      stderr: 'pipe',
    }),
  );
  const [code, stdout, stderr] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  return { code, stdout, errors: stderr.split('\n').filter(Boolean).map((line) => JSON.parse(line).error as string) };
}

test('what cannot work through a transaction pooler is refused at start with a sentence', async () => {
  // PgBouncer refuses the statement bound the service sends when it connects.
  const withoutDirect = await run(['serve'], { DATABASE_DIRECT_URL: '' });
  expect(withoutDirect.errors).toEqual([
    `Could not connect to PostgreSQL at 127.0.0.1:${BOUNCER_PORT} (DATABASE_URL): unsupported startup parameter: statement_timeout, as a connection pooler such as PgBouncer answers; behind a transaction pooler set DATABASE_DIRECT_URL to a direct connection to the same database, for what needs a session.`,
  ]);
  expect(withoutDirect.code).toBe(1);

  // Told to drop the parameter instead, PgBouncer would let statements run unbounded.
  const dropping = await startPgBouncer(db.url, { port: DROPPING_PORT, poolSize: 1, ignoreStartupParameters: ['statement_timeout'] });
  try {
    const dropped = await run(['serve'], { DATABASE_URL: dropping.url, DATABASE_DIRECT_URL: '' });
    expect(dropped.errors).toEqual([
      'DATABASE_URL did not pass on the statement bound sent when connecting (statement_timeout reads off, STATEMENT_TIMEOUT_MS is 30000): a connection pooler that drops startup parameters? Behind a transaction pooler set DATABASE_DIRECT_URL to a direct connection to the same database.',
    ]);
    expect(dropped.code).toBe(1);
  } finally {
    await dropping.stop();
  }

  // With the direct connection named, the bound must come from the database.
  const unbounded = await run(['serve']);
  expect(unbounded.errors).toEqual([
    "Through the pooler (DATABASE_URL) statement_timeout reads off, not bounded by STATEMENT_TIMEOUT_MS (30000): a pooler passes no bound per connection, so set it on the database, ALTER DATABASE … SET statement_timeout = '30000ms' (or on the service's role).",
  ]);
  expect(unbounded.code).toBe(1);
  const name = new URL(db.url).pathname.slice(1);
  await db.sql.unsafe(`alter database ${name} set statement_timeout = '30000ms'`);
  // Server connections PgBouncer opened before keep the setting they were opened with.
  await bouncer.stop();
  bouncer = await startPgBouncer(db.url, { port: BOUNCER_PORT, poolSize: BOUNCER_POOL });
});

test('the walkthrough, an inbox wait, an event stream and a webhook work through PgBouncer', async () => {
  const hook = receiver();
  const created = async (username: string, ...flags: string[]) => {
    const out = await run(['agents', 'create', username, ...flags], { WEBHOOK_ALLOW_LOCAL: 'true' });
    expect(out.code).toBe(0);
    return JSON.parse(out.stdout).apiKey as string;
  };
  const alice = await created('alice');
  const bob = await created('bob');
  await created('carol', '--webhook', hook.url('/carol'));
  service = await startService(env);
  const base = service.base;

  const thread = await call(base, 'POST', '/api/threads', { key: alice, body: { title: 'Release plan', participantUsernames: ['bob', 'carol'] } });
  expect(thread.status).toBe(201);
  const threadId = thread.body.data.id;

  // Bob waits on his inbox and holds his event stream open before Alice posts: both are woken
  // through the direct LISTEN connection.
  const leave = new AbortController();
  const stream = await fetch(`${base}/api/events`, { headers: { authorization: `Bearer ${bob}` }, signal: leave.signal });
  expect(stream.status).toBe(200);
  const next = eventReader(stream.body!);
  const waited = call(base, 'GET', '/api/deliveries?wait=10', { key: bob });
  await eventually(async () => /^ams_inbox_waiting_requests 1$/m.test((await call(base, 'GET', '/metrics', { key: METRICS_TOKEN })).body));

  const post = await call(base, 'POST', `/api/threads/${threadId}/messages`, { key: alice, body: { content: 'Can you check the changelog?' } });
  expect(post.status).toBe(201);
  expect(post.body).toEqual({ success: true, data: { id: expect.any(String), threadId, createdAt: expect.any(String), recipients: 2 } });
  const messageId = post.body.data.id;

  const woken = await waited;
  expect(woken.status).toBe(200);
  expect(woken.body.data).toHaveLength(1);
  expect(woken.body.data[0]).toMatchObject({ messageId, thread: 'Release plan', sender: 'alice' });
  const event = await next();
  expect(event.event).toBe('message.created');
  expect(event.data).toMatchObject({ messageId, threadId });
  leave.abort();

  // Carol's doorbell rings through the worker, whose jobs go through the pooler too.
  const [rung] = await hook.waitFor(1, 10_000);
  expect(rung!.path).toBe('/carol');
  expect(JSON.parse(rung!.raw).data).toMatchObject({ messageId, threadId });

  const deliveryId = woken.body.data[0].deliveryId;
  const read = await call(base, 'GET', `/api/threads/${threadId}/messages`, { key: bob });
  expect(read.status).toBe(200);
  expect(read.body.data.map((m: { id: string }) => m.id)).toEqual([messageId]);
  const acked = await call(base, 'POST', `/api/deliveries/${deliveryId}/acknowledge`, { key: bob });
  expect(acked.status).toBe(200);
  const empty = await call(base, 'GET', '/api/deliveries', { key: bob });
  expect(empty.status).toBe(200);
  expect(empty.body).toEqual({ success: true, data: [] });
  // The doorbell's step is recorded once its handler has answered.
  const receipts = await eventually(async () => {
    const answer = await call(base, 'GET', `/api/messages/${messageId}/deliveries`, { key: alice });
    return answer.body.data?.recipients?.[1]?.step === 'notified' ? answer : null;
  });
  expect(receipts.status).toBe(200);
  expect(receipts.body.data.recipients).toMatchObject([
    { username: 'bob', step: 'fetched', acknowledgedAt: expect.any(String) },
    { username: 'carol', step: 'notified', notifiedAt: expect.any(String) },
  ]);
  const [stored] = await db.sql`select acknowledged_at is not null as acknowledged from deliveries where id = ${deliveryId}`;
  expect(stored!.acknowledged).toBe(true);

  // A burst larger than the service's pools: PostgreSQL sees PgBouncer's connections and the
  // session ones (the LISTEN, graphile-worker's LISTEN, two plan-keeping), and this test's one.
  const burst = await Promise.all(
    Array.from({ length: 40 }, (_, i) => call(base, 'POST', `/api/threads/${threadId}/messages`, { key: alice, body: { content: `burst ${i}` } })),
  );
  expect(burst.map((r) => r.status)).toEqual(Array(40).fill(201));
  await hook.waitFor(41, 10_000);
  const [held] = await db.sql`select count(*)::int as n from pg_stat_activity where datname = current_database() and backend_type = 'client backend'`;
  expect(held!.n).toBeLessThanOrEqual(BOUNCER_POOL + 4 + 1);
  // The session connections are the direct ones, each named, the LISTENs listening.
  const direct = await db.sql<{ name: string; query: string }[]>`
    select application_name as name, query from pg_stat_activity
    where datname = current_database() and application_name like 'agent-messaging-service: %'`;
  expect(direct.map((c) => c.name).sort()).toEqual([
    'agent-messaging-service: LISTEN',
    'agent-messaging-service: doorbell attempt record',
    'agent-messaging-service: doorbell owed look-up',
    'agent-messaging-service: job queue LISTEN',
  ]);
  expect(direct.filter((c) => c.name.endsWith('LISTEN')).map((c) => c.query.slice(0, 7).toLowerCase())).toEqual(['listen ', 'listen ']);
});
