import { describe, expect, test } from 'bun:test';
import { removeParticipant } from '../src/domain/threads/threads';
import { silentLogger } from '../src/log';
import { rememberWebhooks } from '../src/webhooks/credentials';
import { endpointSlots } from '../src/webhooks/endpoint-slots';
import { notifier } from '../src/webhooks/notify-task';
import { useHarness } from './support/harness';
import { eventually, receiver } from './support/receiver';
import { attemptRows, deliveryRow, FAST_WEBHOOKS, post, useWorkerHarness } from './support/webhooks';
import { BY_CLI } from '../src/domain/people/audit';

// "Is a doorbell still owed" is one rule, built on the rule of who may see a delivery: a recipient
// that can no longer see it (removed from the thread, archived, thread closed) is never rung again.
const { h } = useWorkerHarness();
const hook = receiver();

const liveJob = async (deliveryId: string) =>
  (await h.db.sql`select 1 from graphile_worker.jobs where key = ${`notify:${deliveryId}`}`).length > 0;

describe('a doorbell is owed only while its recipient can see the delivery', () => {
  test('a recipient removed from the thread after a failed attempt gets no retry', async () => {
    const sender = await h.agent('steps-sender');
    const recipient = await h.agent('steps-removed', { webhookUrl: hook.url('/removed') });
    let threadId = '';
    hook.reply(async (req) => {
      // The person removes the agent while its handler is failing the first doorbell.
      if (req.path === '/removed' && hook.received.filter((r) => r.path === '/removed').length === 1) {
        await removeParticipant(h.db.sql, BY_CLI, threadId, recipient.username);
      }
      return new Response('down', { status: 500 });
    });
    const thread = await h.call('POST', '/api/threads', { key: sender.key, body: { title: 'Soon without you', participantUsernames: [recipient.username] } });
    threadId = thread.body.data.id;
    const message = await h.call('POST', `/api/threads/${threadId}/messages`, { key: sender.key, body: { content: 'one doorbell only' } });
    const [delivery] = await h.db.sql`select id from deliveries where message_id = ${message.body.data.id}`;
    await eventually(async () => (await attemptRows(h, delivery!.id)).length === 1);
    // The retry job was queued 50 ms after the failure; once it has run (and found nothing owed),
    // no job is left for the delivery. The old rule rang three more times before that.
    await eventually(async () => !(await liveJob(delivery!.id)));
    expect(hook.received.filter((r) => r.path === '/removed')).toHaveLength(1);
    expect((await attemptRows(h, delivery!.id)).map((a) => a.status)).toEqual([500]);
    expect((await deliveryRow(h, delivery!.id)).step).toBe('accepted');
  });
});

describe('a doorbell prepared by the post', () => {
  const q = useHarness(FAST_WEBHOOKS);
  const prepared = receiver();

  test('does not ring when its recipient left the thread after the post, even with the secret known', async () => {
    const sender = await q.agent('prep-steps-sender');
    const recipient = await q.agent('prep-steps-removed', { webhookUrl: prepared.url('/gone') });
    const { threadId, deliveryId } = await post(q, sender, recipient, { content: 'prepared, then removed' });
    // No worker runs in this harness: the post's job waits in the queue with its prepared doorbell.
    const [job] = await q.db.sql<{ payload: any; created_at: Date }[]>`
      select payload, created_at from graphile_worker._private_jobs where key = ${`notify:${deliveryId}`}`;
    expect(job!.payload.doorbell).toBeDefined();
    await removeParticipant(q.db.sql, BY_CLI, threadId, recipient.username);

    const [agent] = await q.db.sql`select id, webhook_url, signing_secret from agents where username = ${recipient.username}`;
    const credentials = rememberWebhooks();
    credentials.remember(agent!.id, job!.payload.doorbell.webhookVersion, {
      url: agent!.webhook_url,
      secrets: { current: agent!.signing_secret, previous: null, previousUntil: null },
      secretVersion: job!.payload.doorbell.secretVersion,
    });
    const { task } = notifier({
      sql: q.db.sql,
      doorbellStatements: { owed: q.db.sql, record: q.db.sql },
      log: silentLogger,
      send: { policy: { allowLocal: true }, timeoutMs: 300 },
      retryPolicy: { delaysMs: [50, 100, 150] },
      onRetryScheduled: () => {},
      credentials,
      slots: endpointSlots({ slowCap: 4, fastCap: 16, reserve: 16 }),
      parkedForMs: 60_000,
      nudge: () => {},
    });
    const now = new Date();
    await task(job!.payload, { job: { attempts: 1, created_at: now, locked_at: now } } as never);
    expect(prepared.received).toHaveLength(0);
    expect(await q.db.sql`select 1 from delivery_attempts where delivery_id = ${deliveryId}`).toHaveLength(0);
  });
});

describe('steps only move forward', () => {
  test('the database refuses a step moved backwards by any writer', async () => {
    const sender = await h.agent('forward-sender');
    const poller = await h.agent('forward-poller');
    const { threadId, deliveryId } = await post(h, sender, poller, { content: 'read me' });
    await h.call('GET', `/api/threads/${threadId}/messages`, { key: poller.key });
    expect((await deliveryRow(h, deliveryId)).step).toBe('fetched');
    const back = await h.db.sql`update deliveries set step = 'accepted' where id = ${deliveryId}`.catch((e) => e);
    expect(back).toBeInstanceOf(Error);
    expect(back.code).toBe('23514');
    expect(back.message).toBe('A delivery step moves only forward: fetched to accepted refused.');
    for (const step of ['notified', 'delivered', 'failed']) {
      expect(await h.db.sql`update deliveries set step = ${step}::delivery_step where id = ${deliveryId}`.catch((e) => e.code)).toBe('23514');
    }
    expect((await deliveryRow(h, deliveryId)).step).toBe('fetched');
  });

  test('a resend (Failed back to Accepted) is the one step back allowed', async () => {
    const sender = await h.agent('forward2-sender');
    const poller = await h.agent('forward2-poller');
    const { deliveryId } = await post(h, sender, poller, { content: 'fail me' });
    await h.db.sql`update deliveries set step = 'failed', failed_step = 'accepted', error = 'x' where id = ${deliveryId}`;
    await h.db.sql`update deliveries set step = 'accepted', failed_step = null where id = ${deliveryId}`;
    expect((await deliveryRow(h, deliveryId)).step).toBe('accepted');
  });
});
