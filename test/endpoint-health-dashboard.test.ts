import { expect, test } from 'bun:test';
import { Webhook } from 'standardwebhooks';
import { endpointAlertsTask } from '../src/webhooks/endpoint-alerts';
import { createLogger } from '../src/log';
import { createMetrics } from '../src/metrics';
import { useDashboardHarness } from './support/dashboard';
import { eventually, receiver } from './support/receiver';
import { uniqueName } from './support/harness';
import { FAST_WEBHOOKS, post, untilStep } from './support/webhooks';

// End to end with the real worker: a handler that answers 500 fails its doorbells, its webhook
// reads as failing on the Agents list, the health sweep (the worker's crontab task, run here with
// short settings) switches it off, a person sends it a test event (a signed `ping`, verified here
// with the standardwebhooks library), fixes the handler, and switches it back on with what failed
// resent, which then rings. The worker's own sweep keeps the default rule (days): with the test's
// 50 ms it could fire at a minute's turn mid-test and switch the webhook off between two retries.
const h = useDashboardHarness(FAST_WEBHOOKS, { worker: true });
const handler = receiver(() => new Response('down for maintenance', { status: 500, headers: { 'retry-after': '120' } }));

const agentOf = async (cookie: string, username: string) => {
  const res = await h.send('GET', `/dashboard/api/agents?q=${username}`, { cookie });
  expect(res.status).toBe(200);
  return res.body.data.items.find((a: { username: string }) => a.username === username);
};

test('a failing webhook is seen, switched off, tested, switched back on with what failed resent, and rings again', async () => {
  await h.invite('grace@example.com', 'grace');
  const cookie = await h.signIn('grace@example.com');
  const sender = await h.agent(uniqueName('health-sender'));
  const recipient = await h.agent(uniqueName('health-hooked'), { webhookUrl: handler.url('/hook') });

  const { deliveryId } = await post(h, sender, recipient, { content: 'invoice ready' });
  await untilStep(h, deliveryId, 'failed');
  const failing = await agentOf(cookie, recipient.username);
  expect(failing.health.state).toBe('failing');
  expect([failing.health.consecutiveFailures, failing.health.lastFailureStatus, failing.health.lastHour.attempts]).toEqual([4, 500, 4]);
  expect(failing.health.lastHour.successRate).toBe(0);
  // Each attempt keeps where it went and what the handler answered, headers included.
  const rows = await h.send('GET', `/dashboard/api/deliveries?agent=${recipient.username}`, { cookie });
  const [attempt] = rows.body.data.items[0].attempts;
  expect([attempt.url, attempt.status, attempt.responseHeaders['retry-after'], attempt.responseBody]).toEqual([
    handler.url('/hook'), 500, '120', 'down for maintenance',
  ]);

  // The crontab's task, as the worker runs it, with a rule under which the spell is long enough.
  const lines: Record<string, unknown>[] = [];
  const metrics = createMetrics();
  const sweep = endpointAlertsTask({
    sql: h.db.sql,
    log: createLogger('info', (line) => lines.push(JSON.parse(line))),
    metrics,
    mailer: null,
    rule: { warnAfterMs: [1], disableAfterMs: 50 },
  });
  await Bun.sleep(60);
  await sweep({}, {} as never);
  expect(lines.map((l) => [l.event, l.agent, l.lastFailure])).toEqual([
    ['webhook_endpoint_disabled', recipient.username, 'the handler answered HTTP 500'],
  ]);
  expect(await metrics.render()).toContain('ams_webhook_endpoint_transitions_total{transition="disabled"} 1');
  const off = await agentOf(cookie, recipient.username);
  expect([off.health.state, off.health.disabledReason]).toEqual([
    'disabled',
    'It answered no attempt with 2xx for 50 milliseconds, so no more doorbells were sent and the agent polls instead.',
  ]);

  // A test event goes to a switched-off webhook all the same: a signed ping, recorded with its answer.
  // The handler holds it until a second one has been refused.
  let release = () => {};
  const held = new Promise<void>((resolve) => (release = resolve));
  handler.reply(async () => {
    await held;
    return new Response('down for maintenance', { status: 500 });
  });
  const before = handler.received.length;
  const sent = await h.send('POST', `/dashboard/api/agents/${recipient.username}/webhook/test-events`, { cookie });
  expect(sent.status).toBe(202);
  expect([sent.body.data.requestedBy, sent.body.data.attemptedAt, sent.body.data.url]).toEqual(['grace', null, handler.url('/hook')]);
  const again = await h.send('POST', `/dashboard/api/agents/${recipient.username}/webhook/test-events`, { cookie });
  expect(again.status).toBe(409);
  expect(again.body.error).toBe(`A test event to ${recipient.username}'s webhook is already on its way; its answer will show here.`);
  release();
  await handler.waitFor(before + 1);
  const ping = handler.received[before]!;
  const verified = new Webhook(recipient.signingSecret!).verify(ping.raw, Object.fromEntries(ping.headers)) as { event: string; data: Record<string, string> };
  expect(verified).toEqual({
    event: 'ping',
    data: { testEventId: sent.body.data.id, agent: recipient.username, requestedBy: 'grace', requestedAt: sent.body.data.requestedAt },
  });
  const tested = await eventually(async () => {
    const agent = await agentOf(cookie, recipient.username);
    return agent.lastTestEvent.attemptedAt ? agent.lastTestEvent : null;
  });
  expect([tested.status, tested.ok, tested.responseBody]).toEqual([500, false, 'down for maintenance']);

  // Fixed: the next test event answers 200, and the endpoint's spell ends (it stays off until a person says).
  handler.reply(() => new Response('ok'));
  expect((await h.send('POST', `/dashboard/api/agents/${recipient.username}/webhook/test-events`, { cookie })).status).toBe(202);
  const answered = await eventually(async () => {
    const agent = await agentOf(cookie, recipient.username);
    return agent.lastTestEvent.ok ? agent : null;
  });
  expect([answered.health.state, answered.health.failingSince]).toEqual(['disabled', null]);

  const enabled = await h.send('POST', `/dashboard/api/agents/${recipient.username}/webhook/enable`, { cookie, body: { resendFailed: true } });
  expect(enabled.status).toBe(200);
  expect(enabled.body.data).toEqual({ username: recipient.username, enabled: true, passingTest: true, resent: 1, refused: [] });
  await untilStep(h, deliveryId, 'notified');
  expect((await agentOf(cookie, recipient.username)).health.state).toBe('healthy');
  const twice = await h.send('POST', `/dashboard/api/agents/${recipient.username}/webhook/enable`, { cookie, body: {} });
  expect([twice.status, twice.body.error]).toEqual([409, `${recipient.username}'s webhook is not switched off.`]);
});

test('a test event to an agent without a webhook, or to nobody, is refused with a sentence', async () => {
  await h.invite('hopper@example.com', 'hopper');
  const cookie = await h.signIn('hopper@example.com');
  const polling = await h.agent(uniqueName('health-polling'));
  const none = await h.send('POST', `/dashboard/api/agents/${polling.username}/webhook/test-events`, { cookie });
  expect([none.status, none.body.error]).toEqual([409, `${polling.username} has no webhook to send a test event to.`]);
  const nobody = await h.send('POST', '/dashboard/api/agents/no-such-agent/webhook/test-events', { cookie });
  expect([nobody.status, nobody.body.error]).toEqual([404, 'No agent named no-such-agent.']);
  const [pending] = await h.db.sql<{ n: number }[]>`select count(*)::int as n from endpoint_test_events e join agents a on a.id = e.agent_id where a.username = ${polling.username}`;
  expect(pending!.n).toBe(0);
});
