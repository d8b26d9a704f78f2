import { expect, test } from 'bun:test';
import { useDashboardHarness } from './support/dashboard';
import { eventReader } from './support/events';

const h = useDashboardHarness();

test('every change to a delivery reaches an open dashboard as an event, whoever made it', async () => {
  await h.invite('ada@example.com', 'ada');
  const cookie = await h.signIn('ada@example.com');
  const alice = await h.agent('alice');
  const bob = await h.agent('bob', { webhookUrl: 'http://127.0.0.1:9/hook' });

  const abort = new AbortController();
  const res = await h.dash.handle(
    new Request('http://localhost/dashboard/api/deliveries/events', { headers: { cookie }, signal: abort.signal }),
  );
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
  const next = eventReader(res.body!);
  expect(await next()).toEqual({ event: 'ready', data: {} });

  const thread = await h.call('POST', '/api/threads', { key: alice.key, body: { title: 'Live', participantUsernames: ['bob'] } });
  const posted = await h.call('POST', `/api/threads/${thread.body.data.id}/messages`, { key: alice.key, body: { content: 'watch me' } });
  const accepted = await next();
  expect(accepted.event).toBe('delivery');
  expect(accepted.data).toMatchObject({ messageId: posted.body.data.id, recipient: 'bob', step: 'accepted', thread: 'Live', summary: 'watch me' });
  const deliveryId = accepted.data.id;

  // What the webhook worker does: log an attempt, then move the step.
  await h.db.sql`insert into delivery_attempts (delivery_id, publish, attempt, duration_ms, status) values (${deliveryId}, 1, 1, 42, 200)`;
  await h.db.sql`update deliveries set step = 'notified', notified_at = now() where id = ${deliveryId}`;
  let seen = await next();
  while (seen.data.step !== 'notified') seen = await next();
  expect(seen.data.attempts).toEqual([
    { attemptedAt: expect.any(String), publish: 1, attempt: 1, resend: 0, status: 200, durationMs: 42, error: null, responseBody: null, requestHeaders: null, interrupted: false },
  ]);

  await h.call('POST', `/api/deliveries/${deliveryId}/delivered`, { key: bob.key });
  const delivered = await next();
  expect(delivered.data).toMatchObject({ id: deliveryId, step: 'delivered', deliveredAt: expect.any(String) });
  abort.abort();
});
