import { expect, test } from 'bun:test';
import { pruneHistory } from '../src/domain/messages/retention';
import { uniqueName, useHarness } from './support/harness';

// Pruning keeps what is recent and removes exactly what is past its period, on this file's own
// database (no worker: jobs stay where the test puts them).
const h = useHarness();

test('the attempt log and dead jobs are pruned by age; messages only when a period is set', async () => {
  const sender = await h.agent(uniqueName('sender'));
  const hooked = await h.agent(uniqueName('hooked'), { webhookUrl: 'http://127.0.0.1:9/hook' });
  const threadId = await h.thread(sender, [hooked]);
  const old = await h.post(sender, threadId, 'from last year');
  const recent = await h.post(sender, threadId, 'from today');
  const [oldDelivery] = await h.db.sql`select id from deliveries where message_id = ${old.id}`;
  const [recentDelivery] = await h.db.sql`select id from deliveries where message_id = ${recent.id}`;
  for (const [delivery, age] of [[oldDelivery!.id, '40 days'], [oldDelivery!.id, '35 days'], [recentDelivery!.id, '1 day']] as const) {
    await h.db.sql`
      insert into delivery_attempts (delivery_id, publish, attempt, attempted_at, duration_ms, status)
      values (${delivery}, 1, 1, now() - ${age}::interval, 12, 500)`;
  }
  await h.db.sql`update messages set created_at = now() - interval '400 days' where id = ${old.id}`;
  // The old doorbell's job died long ago; the recent one is still queued.
  await h.db.sql`
    update graphile_worker._private_jobs set attempts = max_attempts, updated_at = now() - interval '10 days'
    where key = ${`notify:${oldDelivery!.id}`}`;

  // Endpoint health: a window of three days ago and a test event of 40 days ago go; today's stay.
  const [agent] = await h.db.sql`select id from agents where username = ${hooked.username}`;
  for (const age of ['3 days', '1 hour']) {
    await h.db.sql`
      insert into endpoint_attempt_windows (agent_id, window_start, attempts, successes, latency_buckets)
      values (${agent!.id}, now() - ${age}::interval, 1, 1, '{1,0,0,0,0,0,0,0,0,0,0}')`;
    await h.db.sql`
      insert into endpoint_test_events (agent_id, url, webhook_version, requested_by, requested_at, attempted_at, status)
      values (${agent!.id}, 'http://127.0.0.1:9/hook', '1', 'ada', now() - ${age === '3 days' ? '40 days' : age}::interval, now(), 200)`;
  }

  const kept = { attemptLogDays: 30, deadJobDays: 7, messageDays: null, eventHours: 168, auditDays: 365 };
  expect(await pruneHistory(h.db.sql, kept)).toEqual({ attempts: 2, deadJobs: 1, messages: 0, oauthArtifacts: 0, endpointHistory: 2, agentEvents: 0, auditEvents: 0 });
  const [left] = await h.db.sql`
    select (select count(*)::int from endpoint_attempt_windows where agent_id = ${agent!.id}) as windows,
           (select count(*)::int from endpoint_test_events where agent_id = ${agent!.id}) as tests`;
  expect(left).toEqual({ windows: 1, tests: 1 });
  const attempts = await h.db.sql`select delivery_id from delivery_attempts where delivery_id in (${oldDelivery!.id}, ${recentDelivery!.id})`;
  expect(attempts.map((a) => a.delivery_id)).toEqual([recentDelivery!.id]);
  const jobs = await h.db.sql`select key from graphile_worker._private_jobs where key in (${`notify:${oldDelivery!.id}`}, ${`notify:${recentDelivery!.id}`})`;
  expect(jobs.map((j) => j.key)).toEqual([`notify:${recentDelivery!.id}`]);
  expect((await h.db.sql`select id from messages where thread_id = ${threadId} order by id`).map((m) => m.id)).toEqual([old.id, recent.id]);

  // With a message retention of a year: the old message goes, its delivery with it.
  expect(await pruneHistory(h.db.sql, { ...kept, messageDays: 365 })).toEqual({ attempts: 0, deadJobs: 0, messages: 1, oauthArtifacts: 0, endpointHistory: 0, agentEvents: 0, auditEvents: 0 });
  expect((await h.db.sql`select id from messages where thread_id = ${threadId}`).map((m) => m.id)).toEqual([recent.id]);
  expect(await h.db.sql`select 1 from deliveries where id = ${oldDelivery!.id}`).toHaveLength(0);
  expect(await h.db.sql`select 1 from deliveries where id = ${recentDelivery!.id}`).toHaveLength(1);
});

test("the audit trail is pruned past its period, oldest first, and the rest is kept", async () => {
  const agent = await h.agent(uniqueName('audited'));
  await h.db.sql`delete from audit_events where at < now() - interval '1 day'`;
  for (const age of ['400 days', '366 days', '364 days']) {
    await h.db.sql`
      insert into audit_events (at, actor, action, subject_type, subject, before, after)
      values (now() - ${age}::interval, 'cli', 'agent.archive', 'agent', ${agent.username}, '{"archived":false}', '{"archived":true}')`;
  }
  const kept = { attemptLogDays: 30, deadJobDays: 7, messageDays: null, eventHours: 168, auditDays: 365 };
  expect((await pruneHistory(h.db.sql, kept)).auditEvents).toBe(2);
  const left = await h.db.sql`
    select action, extract(day from now() - at)::int as days from audit_events where subject = ${agent.username} order by at`;
  expect(left.map((r) => ({ ...r }))).toEqual([{ action: 'agent.archive', days: 364 }, { action: 'agent.create', days: 0 }]);
});
