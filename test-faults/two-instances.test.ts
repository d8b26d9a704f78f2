import { afterAll, beforeAll, expect, test } from 'bun:test';
import { createAgent } from '../src/domain/agents/agents';
import { testDatabase, type TestDatabase } from '../test/support/database';
import { parkedWait } from '../test/support/inbox';
import { eventually, receiver } from '../test/support/receiver';
import { call, startService, type Service } from './support/service';
import { BY_CLI } from '../src/domain/people/audit';

// Two server processes on one database, both serving the API and both running workers, as in a
// deployment with two replicas.
let db: TestDatabase;
let a: Service;
let b: Service;
let startedAt: number;
// Small pools: the test shares its PostgreSQL server with other test runs.
const env = () => ({ DATABASE_URL: db.url, REPUBLISH_CRON: '* * * * *', LOG_LEVEL: 'debug', DB_POOL_SIZE: '8', WEBHOOK_CONCURRENCY: '8' });
beforeAll(async () => {
  db = await testDatabase();
  [a, b] = await Promise.all([startService(env()), startService(env())]);
  startedAt = Date.now();
}, 60_000);
afterAll(async () => {
  await a?.stop();
  await b?.stop();
  await db?.drop();
});

const arrivals = new Map<string, number>();
const hook = receiver((req) => {
  const { deliveryId } = JSON.parse(req.raw).data;
  arrivals.set(deliveryId, (arrivals.get(deliveryId) ?? 0) + 1);
  return new Response('ok');
});

test('every doorbell is sent exactly once, the inbox wait wakes on either instance, the cron runs once a period', async () => {
  const agent = (username: string, webhookUrl?: string) => createAgent(db.sql, BY_CLI, { username, webhookUrl }, { allowLocal: true });
  const sender = await agent('pair-sender');
  await agent('pair-hooked-1', hook.url('/one'));
  await agent('pair-hooked-2', hook.url('/two'));
  const waiter = await agent('pair-waiter');
  const hooked = (await call(a.base, 'POST', '/api/threads', { key: sender.apiKey, body: { title: 'pair', participantUsernames: ['pair-hooked-1', 'pair-hooked-2'] } })).body.data.id;
  const waited = (await call(b.base, 'POST', '/api/threads', { key: sender.apiKey, body: { title: 'wait', participantUsernames: ['pair-waiter'] } })).body.data.id;

  // 300 messages through both instances at once; both workers pick the doorbells up.
  let next = 0;
  const posted: string[] = [];
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < 300) {
        const base = next++ % 2 === 0 ? a.base : b.base;
        const res = await call(base, 'POST', `/api/threads/${hooked}/messages`, { key: sender.apiKey, body: { content: `pair ${next}` } });
        expect(res.status).toBe(201);
        posted.push(res.body.data.id);
      }
    }),
  );
  await eventually(async () => {
    const [row] = await db.sql`select count(*)::int as n from deliveries where step = 'notified'`;
    return row!.n === 600;
  }, 15_000);
  // Every request the handler got is accounted for by a logged attempt, and no doorbell job is left
  // to send another: only then is "exactly once" final.
  const senders = (s: Service) => s.lines.filter((l) => l.event === 'doorbell_attempt').length;
  await eventually(async () => {
    const [jobs] = await db.sql`select count(*)::int as n from graphile_worker.jobs where task_identifier = 'notify'`;
    return jobs!.n === 0 && senders(a) + senders(b) === [...arrivals.values()].reduce((sum, n) => sum + n, 0);
  }, 15_000);
  expect(arrivals.size).toBe(600);
  expect([...arrivals.values()].filter((n) => n !== 1)).toEqual([]);
  const [attempts] = await db.sql`select count(*)::int as n, count(distinct delivery_id)::int as d from delivery_attempts`;
  expect(attempts).toEqual({ n: 600, d: 600 });
  // Both workers did their share.
  expect(senders(a) + senders(b)).toBe(600);
  expect(senders(a)).toBeGreaterThan(0);
  expect(senders(b)).toBeGreaterThan(0);

  // A bounded wait held by one instance wakes for a message posted through the other, both ways.
  for (const [waitOn, postTo] of [[a, b], [b, a]] as const) {
    const { answer: waiting } = await parkedWait(db.sql, () =>
      call(waitOn.base, 'GET', '/api/deliveries?wait=20', { key: waiter.apiKey, timeoutMs: 25_000 }),
    );
    const started = performance.now();
    const message = await call(postTo.base, 'POST', `/api/threads/${waited}/messages`, { key: sender.apiKey, body: { content: 'wake' } });
    const inbox = await waiting;
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(inbox.body.data.map((e: { messageId: string }) => e.messageId)).toEqual([message.body.data.id]);
    const ack = await call(postTo.base, 'POST', `/api/deliveries/${inbox.body.data[0].deliveryId}/acknowledge`, { key: waiter.apiKey });
    expect(ack.status).toBe(200);
  }

  // The re-publish cron (every minute here) runs once per minute between the two of them:
  // graphile-worker's crontab claims each tick in the database. Past the next minute, once each
  // tick has had a run completed and no re-publish job is left queued or running, the count is final.
  const nextMinute = Math.ceil((Date.now() + 1) / 60_000) * 60_000;
  await Bun.sleep(nextMinute - Date.now());
  const minutes = nextMinute / 60_000 - Math.floor(startedAt / 60_000);
  const sweeps = (s: Service) =>
    s.lines.filter((l) => l.event === 'graphile_worker' && /^Completed task \d+ \(republish\b/.test(String(l.message))).length;
  await eventually(async () => {
    const [jobs] = await db.sql`select count(*)::int as n from graphile_worker.jobs where task_identifier = 'republish'`;
    return jobs!.n === 0 && sweeps(a) + sweeps(b) >= minutes;
  }, 15_000);
  expect(minutes).toBeGreaterThanOrEqual(1);
  expect(sweeps(a) + sweeps(b)).toBe(minutes);
  const [crontab] = await db.sql`
    select identifier, last_execution is not null as ran from graphile_worker._private_known_crontabs where identifier = 'republish'`;
  expect(crontab).toEqual({ identifier: 'republish', ran: true });
  console.log(`two instances: doorbells sent ${senders(a)} + ${senders(b)}, ${minutes} cron tick(s) run ${sweeps(a)} + ${sweeps(b)}`);
}, 120_000);
