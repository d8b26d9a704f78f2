import { describe, expect, test } from 'bun:test';
import { eventually, receiver } from './support/receiver';
import { parkNotifyJob } from '../src/domain/deliveries/notify-jobs';
import { attemptRows, useWorkerHarness } from './support/webhooks';

// Doorbells over their endpoint's cap wait parked, holding no worker slot, and are woken from the
// queue as the endpoint's slots free; none waits for its 60 s backstop while a slot is free.
const { h } = useWorkerHarness({ WEBHOOK_ENDPOINT_CONCURRENCY: '1', WEBHOOK_TIMEOUT_MS: '5000' });
const held: (() => void)[] = [];
const hook = receiver(async (req) => {
  if (req.path === '/one-at-a-time' && hook.received.filter((r) => r.path === '/one-at-a-time').length === 1) {
    await new Promise<void>((resolve) => held.push(resolve));
  }
  return new Response('ok');
});

describe('parked doorbells', () => {
  test('a woken doorbell that is no longer owed passes the wake-up on to the next one parked', async () => {
    const sender = await h.agent('park-sender');
    const recipient = await h.agent('park-recipient', { webhookUrl: hook.url('/one-at-a-time') });
    const threadId = await h.thread(sender, [recipient]);
    const first = await h.post(sender, threadId, 'first: holds the only slot');
    await eventually(async () => held.length === 1);
    const second = await h.post(sender, threadId, 'second: parked, then acknowledged');
    const third = await h.post(sender, threadId, 'third: parked');
    const parked = await eventually(async () => {
      const rows = await h.db.sql`
        select 1 from graphile_worker._private_jobs where (payload::jsonb ->> 'parked')::boolean`;
      return rows.length === 2 ? rows : null;
    });
    expect(parked).toHaveLength(2);
    const [secondDelivery] = await h.db.sql`select id from deliveries where message_id = ${second.id}`;
    expect((await h.call('POST', `/api/deliveries/${secondDelivery!.id}/acknowledge`, { key: recipient.key })).status).toBe(200);

    const released = performance.now();
    held.shift()!();
    // The freed slot wakes the oldest parked doorbell (the second, no longer owed), which wakes the
    // third: it rings long before the backstop.
    await eventually(async () => hook.received.some((r) => r.raw.includes(third.id)), 10_000);
    expect(performance.now() - released).toBeLessThan(10_000);
    expect(hook.received.filter((r) => r.raw.includes(second.id))).toHaveLength(0);
    // The attempt is recorded once the handler's answer is in, a moment after the handler has the request.
    const recorded = async (messageId: string) => {
      const [delivery] = await h.db.sql`select id from deliveries where message_id = ${messageId}`;
      return eventually(async () => {
        const rows = await attemptRows(h, delivery!.id);
        return rows.length > 0 ? rows : null;
      });
    };
    expect((await recorded(third.id)).map((a) => [a.attempt, a.status])).toEqual([[1, 200]]);
    expect((await recorded(first.id)).map((a) => [a.attempt, a.status])).toEqual([[1, 200]]);
  }, 20_000);

  test('a doorbell parked by another process, for an endpoint this worker never saw, is woken by its sweep', async () => {
    // As a worker that died (or one still busy elsewhere) leaves it: parked in the queue, due in a
    // minute, with no process here knowing of it. This worker has free slots for that endpoint.
    const sender = await h.agent('sweep-sender');
    const recipient = await h.agent('sweep-recipient', { webhookUrl: hook.url('/swept') });
    const threadId = await h.thread(sender, [recipient]);
    const message = await h.post(sender, threadId, 'rung, then parked again elsewhere');
    await eventually(async () => hook.received.some((r) => r.raw.includes(message.id)));
    const [delivery] = await h.db.sql`select id from deliveries where message_id = ${message.id}`;
    const deliveryId = delivery!.id as string;
    await eventually(async () => (await h.db.sql`select 1 from graphile_worker.jobs where key = ${`notify:${deliveryId}`}`).length === 0);
    const parkedAt = performance.now();
    await parkNotifyJob(h.db.sql, { deliveryId }, hook.url('/never-seen-here'), 60_000);
    // Woken within the sweep (every second), run, and finished: the delivery is notified already,
    // so it rings no more.
    await eventually(async () => (await h.db.sql`select 1 from graphile_worker.jobs where key = ${`notify:${deliveryId}`}`).length === 0, 10_000);
    expect(performance.now() - parkedAt).toBeLessThan(3_000);
    expect(hook.received.filter((r) => r.raw.includes(message.id))).toHaveLength(1);
  }, 20_000);
});
