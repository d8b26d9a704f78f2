import { describe, expect, test } from 'bun:test';
import { createHash } from 'node:crypto';
import { useDashboardHarness } from './support/dashboard';
import { eventReader } from './support/events';

const h = useDashboardHarness({ SESSION_CHECK_MS: '60000' });
const sha256 = (text: string) => createHash('sha256').update(text).digest();
type Next = ReturnType<typeof eventReader>;
// The next delivery event, past the thread and agent events the same changes bring.
async function deliveryEvent(next: Next) {
  for (;;) {
    const event = await next();
    if (event.event === 'delivery') return event;
  }
}

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
  const accepted = await deliveryEvent(next);
  expect(accepted.event).toBe('delivery');
  expect(accepted.data).toMatchObject({ messageId: posted.body.data.id, recipient: 'bob', step: 'accepted', thread: 'Live', summary: 'watch me' });
  const deliveryId = accepted.data.id;

  // What the webhook worker does: log an attempt, then move the step.
  await h.db.sql`insert into delivery_attempts (delivery_id, publish, attempt, duration_ms, status) values (${deliveryId}, 1, 1, 42, 200)`;
  await h.db.sql`update deliveries set step = 'notified', notified_at = now() where id = ${deliveryId}`;
  let seen = await deliveryEvent(next);
  while (seen.data.step !== 'notified') seen = await deliveryEvent(next);
  expect(seen.data.attempts).toEqual([
    { attemptedAt: expect.any(String), publish: 1, attempt: 1, resend: 0, status: 200, durationMs: 42, error: null, responseBody: null, requestHeaders: null, interrupted: false, url: null, responseHeaders: null },
  ]);

  await h.call('POST', `/api/deliveries/${deliveryId}/delivered`, { key: bob.key });
  const delivered = await deliveryEvent(next);
  expect(delivered.data).toMatchObject({ id: deliveryId, step: 'delivered', deliveredAt: expect.any(String) });
  abort.abort();
});

test('threads and agents that change reach open dashboards too, so that their pages stay live', async () => {
  await h.invite('tia@example.com', 'tia');
  const cookie = await h.signIn('tia@example.com');
  const abort = new AbortController();
  const next = await openStream(cookie, abort.signal);
  const opener = await h.agent('opener');
  expect(await next()).toEqual({ event: 'agent', data: {} });
  const other = await h.agent('other', { webhookUrl: 'http://127.0.0.1:9/other' });
  expect(await next()).toEqual({ event: 'agent', data: {} });
  const thread = await h.call('POST', '/api/threads', { key: opener.key, body: { title: 'Watched', participantUsernames: [other.username] } });
  const id = thread.body.data.id;
  expect(await next()).toEqual({ event: 'thread', data: { ids: [id] } });
  await h.call('POST', `/api/threads/${id}/close`, { key: opener.key });
  expect(await next()).toEqual({ event: 'thread', data: { ids: [id] } });
  await h.send('DELETE', `/dashboard/api/threads/${id}/participants/other`, { cookie });
  expect(await next()).toEqual({ event: 'thread', data: { ids: [id] } });
  await h.db.sql`update agents set archived_at = now() where username = 'other'`;
  expect(await next()).toEqual({ event: 'agent', data: {} });
  abort.abort();
});

const openStream = async (cookie: string, signal?: AbortSignal) => {
  const res = await h.dash.handle(new Request('http://localhost/dashboard/api/deliveries/events', { headers: { cookie }, signal }));
  expect(res.status).toBe(200);
  const next = eventReader(res.body!);
  expect(await next()).toEqual({ event: 'ready', data: {} });
  return next;
};

describe('a stream ends with its session', () => {
  test('signing out ends the streams of that session at once, and only those; later posts reach them no more', async () => {
    await h.invite('lin@example.com', 'lin');
    const leaving = await h.signIn('lin@example.com');
    const staying = await h.signIn('lin@example.com');
    const abort = new AbortController();
    const [first, second, other] = [await openStream(leaving), await openStream(leaving), await openStream(staying, abort.signal)];

    expect((await h.send('POST', '/dashboard/api/sign-out', { cookie: leaving })).status).toBe(200);
    // SESSION_CHECK_MS is a minute here, so only the sign-out itself can have ended them.
    for (const next of [first, second]) {
      expect(await next()).toEqual({ event: 'session-ended', data: { error: 'You signed out; sign in again.', code: 'signed_out' } });
      await expect(next()).rejects.toThrow('the event stream ended');
    }

    const alice = await h.agent('alice-2');
    await h.agent('bob-2');
    const thread = await h.call('POST', '/api/threads', { key: alice.key, body: { title: 'After', participantUsernames: ['bob-2'] } });
    await h.call('POST', `/api/threads/${thread.body.data.id}/messages`, { key: alice.key, body: { content: 'still watching' } });
    expect(await deliveryEvent(other)).toMatchObject({ event: 'delivery', data: { thread: 'After', summary: 'still watching' } });
    abort.abort();
  });
});

describe('a stream ends with its session, checked every SESSION_CHECK_MS', () => {
  const s = useDashboardHarness({ SESSION_CHECK_MS: '100' });

  test('an expired session ends its stream with the reason, so does one signed out elsewhere; a live one stays open', async () => {
    await s.invite('max@example.com', 'max');
    const expiring = await s.signIn('max@example.com');
    const live = await s.signIn('max@example.com');
    const open = async (cookie: string) => {
      const res = await s.dash.handle(new Request('http://localhost/dashboard/api/deliveries/events', { headers: { cookie } }));
      const next = eventReader(res.body!);
      expect(await next()).toEqual({ event: 'ready', data: {} });
      return next;
    };
    const doomed = await open(expiring);
    const kept = await open(live);

    await s.db.sql`update sessions set expires_at = now() - interval '1 second' where token_hash = ${sha256(expiring.split('=')[1]!)}`;
    expect(await doomed()).toEqual({ event: 'session-ended', data: { error: 'Your session expired; sign in again.', code: 'session_expired' } });
    await expect(doomed()).rejects.toThrow('the event stream ended');

    const alice = await s.agent('alice');
    await s.agent('bob');
    const thread = await s.call('POST', '/api/threads', { key: alice.key, body: { title: 'Kept', participantUsernames: ['bob'] } });
    await s.call('POST', `/api/threads/${thread.body.data.id}/messages`, { key: alice.key, body: { content: 'still here' } });
    expect(await deliveryEvent(kept)).toMatchObject({ event: 'delivery', data: { thread: 'Kept', summary: 'still here' } });

    // Signed out through another instance: the session is gone from the table, and this process notices.
    await s.db.sql`delete from sessions where token_hash = ${sha256(live.split('=')[1]!)}`;
    expect(await kept()).toEqual({ event: 'session-ended', data: { error: 'You signed out; sign in again.', code: 'signed_out' } });
    await expect(kept()).rejects.toThrow('the event stream ended');
  });
});
