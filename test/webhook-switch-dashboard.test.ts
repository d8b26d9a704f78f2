import { expect, test } from 'bun:test';
import { useDashboardHarness } from './support/dashboard';
import { uniqueName } from './support/harness';

// The dashboard API's doors to pausing, resuming and switching back on (docs/internals/dashboard.md):
// exact statuses and envelopes, the stored state and the audit trail behind them.
const h = useDashboardHarness();
const hook = 'http://127.0.0.1:9/hook';

const stored = async (username: string) =>
  (await h.db.sql`
    select webhook_url as url, webhook_disabled_at is not null as off, webhook_disabled_reason as reason, webhook_paused_by as "pausedBy"
    from agents where username = ${username}`)[0];

test('pause and resume: the answers, the refusals, what is stored and recorded', async () => {
  await h.invite('lin@example.com', 'lin');
  const cookie = await h.signIn('lin@example.com');
  const agent = await h.agent(uniqueName('switch-api'), { webhookUrl: hook });
  const polling = await h.agent(uniqueName('switch-api-polling'));
  const call = (verb: string, username: string, body: unknown = {}) =>
    h.send('POST', `/dashboard/api/agents/${username}/webhook/${verb}`, { cookie, body });

  const tooLong = await call('pause', agent.username, { reason: 'x'.repeat(501) });
  expect([tooLong.status, tooLong.body]).toEqual([400, { success: false, error: 'reason must be text of at most 500 characters', code: 'invalid', field: 'reason' }]);
  const none = await call('pause', polling.username);
  expect([none.status, none.body]).toEqual([409, { success: false, error: `${polling.username} has no webhook to pause.`, code: 'conflict' }]);
  const nobody = await call('pause', 'no-such-agent');
  expect([nobody.status, nobody.body.error]).toEqual([404, 'No agent named no-such-agent.']);
  const notPaused = await call('resume', agent.username);
  expect([notPaused.status, notPaused.body.error]).toEqual([409, `${agent.username}'s webhook is not paused.`]);

  const paused = await call('pause', agent.username, { reason: 'Rolling out v2 of the handler' });
  expect(paused.status).toBe(200);
  expect(paused.body).toEqual({
    success: true,
    data: { username: agent.username, paused: true, pausedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/), pausedBy: 'lin', reason: 'Rolling out v2 of the handler' },
  });
  expect(await stored(agent.username)).toEqual({ url: hook, off: true, reason: 'Rolling out v2 of the handler', pausedBy: 'lin' });
  const listed = await h.send('GET', `/dashboard/api/agents?q=${agent.username}`, { cookie });
  const health = listed.body.data.items.find((a: { username: string }) => a.username === agent.username).health;
  expect([health.state, health.pausedBy, health.disabledAt, health.disabledReason]).toEqual(['paused', 'lin', paused.body.data.pausedAt, 'Rolling out v2 of the handler']);
  const twice = await call('pause', agent.username);
  expect([twice.status, twice.body.error]).toEqual([409, `${agent.username}'s webhook is already paused.`]);
  const enable = await call('enable', agent.username, { withoutPassingTest: true });
  expect([enable.status, enable.body.error]).toEqual([409, `${agent.username}'s webhook was paused by lin, not switched off: resume it instead.`]);

  const resumed = await call('resume', agent.username, { resendFailed: true });
  expect([resumed.status, resumed.body]).toEqual([200, { success: true, data: { username: agent.username, resumed: true, resent: 0, refused: [] } }]);
  expect(await stored(agent.username)).toEqual({ url: hook, off: false, reason: null, pausedBy: null });

  const trail = await h.db.sql`select actor, action, before, after, reason from audit_events where subject = ${agent.username} and action like 'agent.webhook.%' order by id`;
  expect([...trail]).toEqual([
    { actor: 'lin', action: 'agent.webhook.pause', before: { state: 'active' }, after: { state: 'paused' }, reason: 'Rolling out v2 of the handler' },
    { actor: 'lin', action: 'agent.webhook.resume', before: { state: 'paused', pausedBy: 'lin' }, after: { state: 'active', resent: 0 }, reason: null },
  ]);
});

test('switching back on without a passing test is refused unless the person says so', async () => {
  await h.invite('mo@example.com', 'mo');
  const cookie = await h.signIn('mo@example.com');
  const agent = await h.agent(uniqueName('switch-api-off'), { webhookUrl: hook });
  await h.db.sql`update agents set webhook_disabled_at = now(), webhook_disabled_reason = 'failing' where username = ${agent.username}`;
  const enable = (body: unknown) => h.send('POST', `/dashboard/api/agents/${agent.username}/webhook/enable`, { cookie, body });

  const asked = await enable({ resendFailed: true });
  expect([asked.status, asked.body]).toEqual([
    409,
    { success: false, error: `No test event has been sent to ${agent.username}'s webhook since it was switched off: send a test event, or switch it back on without a passing test.`, code: 'conflict' },
  ]);
  expect((await stored(agent.username))!.off).toBe(true);
  const resume = await h.send('POST', `/dashboard/api/agents/${agent.username}/webhook/resume`, { cookie, body: {} });
  expect([resume.status, resume.body.error]).toEqual([409, `${agent.username}'s webhook was switched off by the service, not paused: switch it back on instead.`]);
  const pause = await h.send('POST', `/dashboard/api/agents/${agent.username}/webhook/pause`, { cookie, body: {} });
  expect([pause.status, pause.body.error]).toEqual([409, `${agent.username}'s webhook is already switched off by the service: no doorbells go to it.`]);

  const enabled = await enable({ withoutPassingTest: true });
  expect([enabled.status, enabled.body]).toEqual([200, { success: true, data: { username: agent.username, enabled: true, passingTest: false, resent: 0, refused: [] } }]);
  expect(await stored(agent.username)).toEqual({ url: hook, off: false, reason: null, pausedBy: null });
});
