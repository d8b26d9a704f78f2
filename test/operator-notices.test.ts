import { expect, test } from 'bun:test';
import { Webhook } from 'standardwebhooks';
import { environmentOperatorWebhook, loadConfig } from '../src/config';
import { endpointAlertsTask } from '../src/webhooks/endpoint-alerts';
import { holdTasks, HOLD_NOTICES_TASK } from '../src/hold-alerts';
import { breakLoop } from '../src/domain/threads/loop-breaker';
import { sendRules } from '../src/domain/messages/send-rules';
import { addOperatorWebhook, syncEnvironmentWebhook } from '../src/domain/people/operator-webhooks';
import { operatorNoticeTask } from '../src/webhooks/operator-notice-task';
import { operatorNoticeBody } from '../src/domain/people/operator-notice-body';
import { createLogger } from '../src/log';
import { useDashboardHarness } from './support/dashboard';
import { eventually, receiver, type Received } from './support/receiver';
import { uniqueName } from './support/harness';
import { FAST_WEBHOOKS, post, untilStep } from './support/webhooks';

// Operator webhooks end to end with the real worker: people add them on the dashboard (or the
// environment sets one), and a real local receiver gets every kind of notice, signed with Standard
// Webhooks headers (verified with the standardwebhooks library), in Slack's body or the typed JSON
// one, retried when the receiver fails, every attempt recorded and the webhook's health kept.
const PUBLIC_URL = 'https://ams.example.com';
const TOKEN = 'scrape-me-0123456789';
const h = useDashboardHarness({ ...FAST_WEBHOOKS, PUBLIC_URL, METRICS_TOKEN: TOKEN, OPERATOR_WEBHOOK_RETRY_DELAYS_MS: '100,200', OPERATOR_WEBHOOK_TIMEOUT_MS: '1000' }, { worker: true });
const slack = receiver();
const json = receiver();
const agentsHandler = receiver(() => new Response('service unavailable: database is down', { status: 503 }));

let cookie = '';
const as = (method: string, path: string, body?: unknown) => h.send(method, `/dashboard/api${path}`, { cookie, body });
const hooks: { slack: { id: string; secret: string }; json: { id: string; secret: string } } = {} as never;

// The notices a receiver got after `from`, each verified against the secret and parsed.
function verified(received: Received[], secret: string) {
  return received.map((r) => {
    const body = new Webhook(secret).verify(r.raw, Object.fromEntries(r.headers)) as Record<string, any>;
    return { body, id: r.headers.get('webhook-id'), headers: r.headers };
  });
}

async function nextNotices(count: number) {
  const [s, j] = [slack.received.length, json.received.length];
  return async () => {
    await slack.waitFor(s + count);
    await json.waitFor(j + count);
    return {
      slack: verified(slack.received.slice(s, s + count), hooks.slack.secret),
      json: verified(json.received.slice(j, j + count), hooks.json.secret),
    };
  };
}

test('people add operator webhooks on the dashboard: the secret once, refusals in the envelope, each change audited', async () => {
  await h.invite('ops@example.com', 'ops');
  cookie = await h.signIn('ops@example.com');
  expect((await h.send('GET', '/dashboard/api/operator-webhooks')).status).toBe(401);
  const empty = await as('GET', '/operator-webhooks');
  expect([empty.status, empty.body]).toEqual([200, { success: true, data: { webhooks: [], dashboardLinks: true } }]);

  const badFormat = await as('POST', '/operator-webhooks', { url: slack.url('/slack'), format: 'xml' });
  expect([badFormat.status, badFormat.body]).toEqual([
    400,
    { success: false, error: 'format must be one of slack, json: slack for a Slack incoming webhook, json for a typed JSON event', code: 'invalid', field: 'format' },
  ]);
  const noUrl = await as('POST', '/operator-webhooks', { format: 'json' });
  expect([noUrl.status, noUrl.body.error, noUrl.body.field]).toEqual([400, 'url is required: the address notices are posted to', 'url']);
  const credentials = await as('POST', '/operator-webhooks', { url: 'http://me:pw@127.0.0.1:9/x' });
  expect([credentials.status, credentials.body.error]).toEqual([400, 'url must not contain credentials']);

  const added = await as('POST', '/operator-webhooks', { url: slack.url('/slack'), format: 'slack' });
  expect(added.status).toBe(201);
  expect(added.body.data).toEqual({
    id: expect.any(String),
    url: slack.url('/slack'),
    format: 'slack',
    source: 'dashboard',
    addedBy: 'ops',
    addedAt: expect.any(String),
    health: { state: 'untried', lastSuccessAt: null, lastFailureAt: null, lastFailure: null, failingSince: null },
    pending: 0,
    recentAttempts: [],
    secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
  });
  hooks.slack = { id: added.body.data.id, secret: added.body.data.secret };
  const second = await as('POST', '/operator-webhooks', { url: json.url('/json'), format: 'json' });
  expect(second.status).toBe(201);
  hooks.json = { id: second.body.data.id, secret: second.body.data.secret };

  // The secret is shown once: the list never carries it.
  const listed = await as('GET', '/operator-webhooks');
  expect(listed.body.data.webhooks.map((w: Record<string, unknown>) => [w.url, w.format, 'secret' in w])).toEqual([
    [slack.url('/slack'), 'slack', false],
    [json.url('/json'), 'json', false],
  ]);
  const audit = await as('GET', '/audit?action=operator_webhook.');
  expect(audit.body.data.items.map((e: Record<string, unknown>) => [e.actor, e.action, e.subjectType, e.subject, e.after])).toEqual([
    ['ops', 'operator_webhook.add', 'operator_webhook', hooks.json.id, { url: json.url('/json'), format: 'json' }],
    ['ops', 'operator_webhook.add', 'operator_webhook', hooks.slack.id, { url: slack.url('/slack'), format: 'slack' }],
  ]);
  expect((await as('POST', '/operator-webhooks/not-an-id/test')).status).toBe(404);
  expect((await as('DELETE', '/operator-webhooks/0190f5c2-7b1e-7000-8000-000000000000')).body.error).toBe('No such operator webhook; it may have been removed.');
});

test('a test notice: Slack incoming-webhook body exactly, the typed JSON event, both signed', async () => {
  const notices = await nextNotices(1);
  const sent = await as('POST', `/operator-webhooks/${hooks.slack.id}/test`);
  expect([sent.status, sent.body.data]).toEqual([202, { id: hooks.slack.id, queued: true }]);
  expect((await as('POST', `/operator-webhooks/${hooks.json.id}/test`)).status).toBe(202);
  const { slack: [s], json: [j] } = await notices();
  const at = j!.body.data.at as string;
  const minute = `${at.slice(0, 10)} ${at.slice(11, 16)} UTC`;
  expect(s!.body).toEqual({
    text: `Test notice: ops sent this test notice at ${minute}: notices reach this webhook.`,
    blocks: [
      { type: 'section', text: { type: 'mrkdwn', text: `*Test notice*\nops sent this test notice at ${minute}: notices reach this webhook.` } },
      { type: 'section', text: { type: 'mrkdwn', text: `<${PUBLIC_URL}/dashboard/notifications|Open on the dashboard>` } },
    ],
  });
  expect(j!.body).toEqual({
    type: 'test',
    id: j!.id,
    timestamp: expect.any(String),
    title: 'Test notice',
    text: `ops sent this test notice at ${minute}: notices reach this webhook.`,
    reason: null,
    link: `${PUBLIC_URL}/dashboard/notifications`,
    data: { requestedBy: 'ops', at },
  });
  expect([s!.headers.get('content-type'), s!.headers.get('user-agent')]).toEqual(['application/json', 'agent-messaging-service-webhooks/1']);
  const state = await eventually(async () => {
    const list = (await as('GET', '/operator-webhooks')).body.data.webhooks;
    return list.every((w: any) => w.health.state === 'healthy') ? list : null;
  });
  expect(state[0].recentAttempts).toEqual([
    { noticeId: s!.id, event: 'test', attempt: 1, attemptedAt: expect.any(String), durationMs: expect.any(Number), status: 200, error: null, responseBody: 'ok', outcome: 'delivered' },
  ]);
});

test("an agent's webhook warned (status and the answer's first bytes), switched off, and back", async () => {
  const sender = await h.agent(uniqueName('ops-sender'));
  const failing = await h.agent(uniqueName('ops-failing'), { webhookUrl: agentsHandler.url('/failing') });
  const { deliveryId } = await post(h, sender, failing, { content: 'invoice ready' });
  await untilStep(h, deliveryId, 'failed');

  const lines: Record<string, unknown>[] = [];
  const sweep = (rule: { warnAfterMs: number[]; disableAfterMs: number | null }) =>
    endpointAlertsTask({ sql: h.db.sql, log: createLogger('info', (line) => lines.push(JSON.parse(line))), mailer: null, rule })({}, {} as never);

  let notices = await nextNotices(1);
  await Bun.sleep(20);
  await sweep({ warnAfterMs: [1, 86_400_000], disableAfterMs: 432_000_000 });
  let got = await notices();
  const [{ failingSince }] = (await h.db.sql<{ failingSince: Date }[]>`
    select h.failing_since as "failingSince" from endpoint_health h join agents a on a.id = h.agent_id where a.username = ${failing.username}`) as unknown as [{ failingSince: Date }];
  const since = failingSince.toISOString();
  const offAt = new Date(failingSince.getTime() + 432_000_000).toISOString();
  const minute = (iso: string) => `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`;
  const warnedText = `${failing.username}'s webhook (${agentsHandler.url('/failing')}) has answered no attempt with 2xx since ${minute(since)} (warning 1 of 2). It will be switched off at ${minute(offAt)} unless it answers.`;
  const reason = 'the handler answered HTTP 503: "service unavailable: database is down"';
  const link = `${PUBLIC_URL}/dashboard/agents?q=${failing.username}`;
  expect(got.slack[0]!.body).toEqual({
    text: `Webhook failing: ${failing.username}: ${warnedText}`,
    blocks: [
      { type: 'section', text: { type: 'mrkdwn', text: `*Webhook failing: ${failing.username}*\n${warnedText}` } },
      { type: 'section', text: { type: 'mrkdwn', text: `*Last answer:* ${reason}` } },
      { type: 'section', text: { type: 'mrkdwn', text: `<${link}|Open on the dashboard>` } },
    ],
  });
  expect(got.json[0]!.body).toMatchObject({
    type: 'endpoint.warned',
    reason,
    link,
    data: {
      agent: failing.username,
      url: agentsHandler.url('/failing'),
      stage: 1,
      stages: 2,
      failingSince: since,
      switchesOffAt: offAt,
      reason: { status: 503, error: null, answer: 'service unavailable: database is down' },
    },
  });

  // Fixed: its next doorbell answers 200, and the next sweep tells operators it is back, once.
  agentsHandler.reply(() => new Response('ok'));
  const again = await post(h, sender, failing, { content: 'second invoice' });
  await untilStep(h, again.deliveryId, 'notified');
  notices = await nextNotices(1);
  await sweep({ warnAfterMs: [1, 86_400_000], disableAfterMs: 432_000_000 });
  got = await notices();
  expect(got.json[0]!.body).toMatchObject({ type: 'endpoint.back', title: `Webhook answering again: ${failing.username}`, data: { agent: failing.username, how: 'answered', by: null } });
  expect(got.slack[0]!.body.text).toStartWith(`Webhook answering again: ${failing.username}: ${failing.username}'s webhook (${agentsHandler.url('/failing')}) answered with 2xx at `);
  await sweep({ warnAfterMs: [1, 86_400_000], disableAfterMs: 432_000_000 });
  expect(lines.filter((l) => l.event === 'webhook_endpoint_back').map((l) => l.agent)).toEqual([failing.username]);

  // Failing again long enough: switched off, with the reason.
  agentsHandler.reply(() => new Response('gone fishing', { status: 500 }));
  const third = await post(h, sender, failing, { content: 'third invoice' });
  await untilStep(h, third.deliveryId, 'failed');
  notices = await nextNotices(1);
  await Bun.sleep(60);
  await sweep({ warnAfterMs: [], disableAfterMs: 50 });
  got = await notices();
  expect(got.json[0]!.body).toMatchObject({
    type: 'endpoint.switched_off',
    title: `Webhook switched off: ${failing.username}`,
    reason: 'the handler answered HTTP 500: "gone fishing"',
    data: { agent: failing.username, reason: { status: 500, error: null, answer: 'gone fishing' } },
  });
  expect(got.slack[0]!.body.blocks[0].text.text).toEndWith('so it was switched off: its messages wait in its inbox until a person switches it back on from the Agents page.');

  // A person switches it back on: operators hear it at once, and who did it; the sweep does not tell it again.
  notices = await nextNotices(1);
  const on = await as('POST', `/agents/${failing.username}/webhook/enable`, { withoutPassingTest: true });
  expect(on.status).toBe(200);
  got = await notices();
  expect(got.json[0]!.body).toMatchObject({
    type: 'endpoint.back',
    title: `Webhook switched back on: ${failing.username}`,
    data: { agent: failing.username, url: agentsHandler.url('/failing'), how: 'switched_on', by: 'ops' },
  });
  expect(got.slack[0]!.body.text).toStartWith(`Webhook switched back on: ${failing.username}: ops switched ${failing.username}'s webhook (${agentsHandler.url('/failing')}) back on at `);
  const told = await h.db.sql`select 1 from operator_endpoint_alerts e join agents a on a.id = e.agent_id where a.username = ${failing.username}`;
  expect(told.length).toBe(0);
});

test('messages waiting for approval: one notice per digest period, with how many wait and the oldest', async () => {
  const sender = await h.agent(uniqueName('ops-held'));
  const other = await h.agent(uniqueName('ops-reader'));
  const threadId = await h.thread(sender, [other], 'Quarterly numbers');
  await h.db.sql`update agents set holds_messages = true where username = ${sender.username}`;
  for (const content of ['first held line', 'second held']) {
    const res = await h.call('POST', `/api/threads/${threadId}/messages`, { key: sender.key, body: { content } });
    expect(res.status).toBe(202);
  }
  const tasks = holdTasks({ sql: h.db.sql, log: createLogger('error', () => {}), mailer: null, publicUrl: PUBLIC_URL, holdHours: 168 });
  const notices = await nextNotices(1);
  await tasks[HOLD_NOTICES_TASK]!({}, {} as never);
  const got = await notices();
  const [oldest] = await h.db.sql<{ at: Date }[]>`select min(created_at) as at from held_messages where state = 'held'`;
  expect(got.json[0]!.body).toMatchObject({
    type: 'holds.waiting',
    title: '2 messages wait for approval',
    link: `${PUBLIC_URL}/dashboard/overview#waiting`,
    data: { waiting: 2, fresh: 2, oldestAt: oldest!.at.toISOString(), oldest: { sender: sender.username, threadTitle: 'Quarterly numbers', line: 'first held line' } },
  });
  // Within the period, more waiting messages make no second notice.
  await h.call('POST', `/api/threads/${threadId}/messages`, { key: sender.key, body: { content: 'third' } });
  await tasks[HOLD_NOTICES_TASK]!({}, {} as never);
  await Bun.sleep(300);
  expect([...(await h.db.sql`select count(*)::int as n from operator_notices where event = 'holds.waiting'`)]).toEqual([{ n: 2 }]);
});

test('a thread paused by the loop breaker is told at once', async () => {
  const a = await h.agent(uniqueName('ops-loop-a'));
  const b = await h.agent(uniqueName('ops-loop-b'));
  const threadId = await h.thread(a, [b], 'Ping pong');
  for (const who of [a, b, a]) await h.post(who, threadId, 'again');
  const notices = await nextNotices(1);
  const rules = sendRules({ ...h.config, LOOP_BREAKER_MESSAGES: 2, LOOP_BREAKER_WINDOW_MINUTES: 10 });
  expect(await breakLoop(h.db.sql, threadId, rules)).toBe(true);
  const got = await notices();
  const [{ pausedAt }] = (await h.db.sql<{ pausedAt: Date }[]>`select paused_at as "pausedAt" from threads where id = ${threadId}`) as unknown as [{ pausedAt: Date }];
  expect(got.json[0]!.body).toMatchObject({
    type: 'thread.loop_broken',
    title: 'Thread paused by the loop breaker: Ping pong',
    link: `${PUBLIC_URL}/dashboard/threads/${threadId}`,
    data: { threadId, title: 'Ping pong', pausedAt: pausedAt.toISOString(), messages: 2, windowMinutes: 10 },
  });
  expect(got.slack[0]!.body.text).toContain('The agents of "Ping pong" exchanged more than 2 messages within 10 minutes');
  // Paused already: no second pause, no second notice.
  expect(await breakLoop(h.db.sql, threadId, rules)).toBe(false);
});

test('a failing receiver gets retries on the schedule, every attempt recorded, then success; its health says so', async () => {
  let calls = 0;
  json.reply(() => (++calls <= 2 ? new Response('upstream timeout', { status: 502 }) : new Response('thanks')));
  const start = json.received.length;
  expect((await as('POST', `/operator-webhooks/${hooks.json.id}/test`)).status).toBe(202);
  const failing = await eventually(async () => {
    const w = (await as('GET', '/operator-webhooks')).body.data.webhooks.find((x: any) => x.id === hooks.json.id);
    return w.health.state === 'failing' ? w : null;
  });
  expect([failing.health.lastFailure, failing.pending]).toEqual(['the handler answered HTTP 502', 1]);
  await json.waitFor(start + 3);
  const tries = json.received.slice(start, start + 3);
  // One notice: the same webhook-id on each attempt, after the configured delays.
  expect(new Set(tries.map((r) => r.headers.get('webhook-id'))).size).toBe(1);
  expect(tries[1]!.at - tries[0]!.at).toBeGreaterThanOrEqual(100);
  expect(tries[2]!.at - tries[1]!.at).toBeGreaterThanOrEqual(200);
  verified(tries, hooks.json.secret);
  const healthy = await eventually(async () => {
    const w = (await as('GET', '/operator-webhooks')).body.data.webhooks.find((x: any) => x.id === hooks.json.id);
    return w.health.state === 'healthy' ? w : null;
  });
  expect(healthy.health.failingSince).toBeNull();
  expect(healthy.recentAttempts.slice(0, 3).map((a: any) => [a.attempt, a.status, a.responseBody, a.outcome])).toEqual([
    [3, 200, 'thanks', 'delivered'],
    [2, 502, 'upstream timeout', 'retrying'],
    [1, 502, 'upstream timeout', 'retrying'],
  ]);
  json.reply(() => new Response('ok'));
});

test('a receiver that never takes it: given up after the last retry, counted in the metrics', async () => {
  const dead = receiver(() => new Response('nope', { status: 500 }));
  const added = await as('POST', '/operator-webhooks', { url: dead.url('/dead'), format: 'json' });
  expect((await as('POST', `/operator-webhooks/${added.body.data.id}/test`)).status).toBe(202);
  await dead.waitFor(3);
  const gaveUp = await eventually(async () => {
    const [row] = await h.db.sql`select attempts, gave_up_at from operator_notices where webhook_id = ${added.body.data.id}`;
    return row?.gave_up_at ? row : null;
  });
  expect(gaveUp.attempts).toBe(3);
  await Bun.sleep(400);
  expect(dead.received.length).toBe(3);
  const scrape = String((await h.call('GET', '/metrics', { key: TOKEN })).body);
  expect(scrape).toContain('ams_operator_notices_total{event="test",outcome="gave_up"} 1\n');
  expect(scrape).toContain('ams_operator_notices_total{event="test",outcome="retrying"} 4\n');
  expect(scrape).toContain('ams_operator_webhooks{state="failing"} 1\n');

  // Removed: recorded, and its notices go with it.
  const removed = await as('DELETE', `/operator-webhooks/${added.body.data.id}`);
  expect([removed.status, removed.body.data]).toEqual([200, { id: added.body.data.id, removed: true }]);
  expect([...(await h.db.sql`select count(*)::int as n from operator_notices where webhook_id = ${added.body.data.id}`)]).toEqual([{ n: 0 }]);
  const audit = await as('GET', `/audit?subject=${added.body.data.id}`);
  expect(audit.body.data.items.map((e: any) => [e.action, e.before])).toEqual([
    ['operator_webhook.remove', { url: dead.url('/dead'), format: 'json' }],
    ['operator_webhook.add', null],
  ]);
});

test('by environment: the secret is required with the URL; the webhook is written at start, listed, not removable on the dashboard', async () => {
  expect(() => loadConfig({ OPERATOR_WEBHOOK_URL: 'https://hooks.example.com/x' })).toThrow('OPERATOR_WEBHOOK_SECRET must be set with OPERATOR_WEBHOOK_URL');
  expect(() => loadConfig({ OPERATOR_WEBHOOK_URL: 'https://hooks.example.com/x', OPERATOR_WEBHOOK_SECRET: 'short' })).toThrow('OPERATOR_WEBHOOK_SECRET must be a Standard Webhooks secret');
  const secret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
  const config = loadConfig({ OPERATOR_WEBHOOK_URL: slack.url('/from-env'), OPERATOR_WEBHOOK_SECRET: secret, OPERATOR_WEBHOOK_FORMAT: 'json' });
  await syncEnvironmentWebhook(h.db.sql, environmentOperatorWebhook(config));
  const listed = (await as('GET', '/operator-webhooks')).body.data.webhooks.find((w: any) => w.source === 'environment');
  expect([listed.url, listed.format, listed.addedBy]).toEqual([slack.url('/from-env'), 'json', 'environment']);
  const before = slack.received.length;
  expect((await as('POST', `/operator-webhooks/${listed.id}/test`)).status).toBe(202);
  await slack.waitFor(before + 1);
  const [got] = verified(slack.received.slice(before, before + 1), secret);
  expect([got!.body.type, got!.body.data.requestedBy]).toEqual(['test', 'ops']);
  const refused = await as('DELETE', `/operator-webhooks/${listed.id}`);
  expect([refused.status, refused.body.error]).toEqual([409, 'This webhook is set by OPERATOR_WEBHOOK_URL; unset that variable and restart to remove it.']);
  await syncEnvironmentWebhook(h.db.sql, null);
  expect((await as('GET', '/operator-webhooks')).body.data.webhooks.some((w: any) => w.source === 'environment')).toBe(false);
});

test("the rules for agents' webhooks hold: a private address is refused when added and at each send; an answer is kept to its first KiB", async () => {
  const [person] = await h.db.sql<{ id: string; username: string }[]>`select id, username from people where username = 'ops'`;
  const strict = { allowLocal: false };
  await expect(addOperatorWebhook(h.db.sql, person!, { url: 'https://127.0.0.1/hook', format: 'json' }, strict)).rejects.toThrow(
    /^url must point to a public address.*127\.0\.0\.1 resolves to a private, loopback or reserved one$/,
  );
  await expect(addOperatorWebhook(h.db.sql, person!, { url: 'http://hooks.example.com/x', format: 'json' }, strict)).rejects.toThrow(/^url must use https:\/\//);

  // Notices written straight into the tables (no job, so that the running worker leaves them to this
  // test), each sent by the worker's task under the policy given.
  const long = receiver(() => new Response('x'.repeat(5_000), { status: 500 }));
  const send = async (url: string, policy: { allowLocal: boolean }) => {
    const [hook] = await h.db.sql<{ id: string }[]>`
      insert into operator_webhooks (url, format, secret, source, added_by) values (${url}, 'json', ${hooks.json.secret}, 'dashboard', 'test') returning id`;
    const [notice] = await h.db.sql<{ id: string }[]>`
      insert into operator_notices (webhook_id, event, notice) values (${hook!.id}, 'test', ${h.db.sql.json({ event: 'test', requestedBy: 'ops', at: new Date().toISOString() })})
      returning id`;
    const task = operatorNoticeTask({ sql: h.db.sql, log: createLogger('error', () => {}), send: { policy, timeoutMs: 1_000 }, retryDelaysMs: [] });
    await task({ noticeId: notice!.id, attempt: 1 }, { abortSignal: new AbortController().signal } as never);
    const [row] = await h.db.sql<{ error: string | null; body: string | null; gaveUp: Date | null }[]>`
      select a.error, a.response_body as body, n.gave_up_at as "gaveUp"
      from operator_notice_attempts a join operator_notices n on n.id = a.notice_id where a.notice_id = ${notice!.id}`;
    await h.db.sql`delete from operator_webhooks where id = ${hook!.id}`;
    return row!;
  };
  const refused = await send(long.url('/private'), strict);
  expect(refused.error).toStartWith('refused to send: webhookUrl must use https:// unless WEBHOOK_ALLOW_LOCAL=true is set');
  expect(long.received.length).toBe(0);
  const capped = await send(long.url('/long'), { allowLocal: true });
  expect([capped.error, capped.body?.length, capped.gaveUp === null]).toEqual([null, 1024, false]);
});

test("Slack's body escapes what agents and handlers wrote, and keeps each section within Slack's 3 000 characters", () => {
  const notice = {
    event: 'thread.loop_broken' as const,
    threadId: '0190f5c2-7b1e-7000-8000-000000000000',
    title: `<!channel> & <https://evil.example|click>${'&'.repeat(400)}`,
    pausedAt: '2026-11-29T06:10:00.000Z',
    messages: 50,
    windowMinutes: 10,
  };
  const body = JSON.parse(operatorNoticeBody({ id: 'n1', notice, createdAt: '2026-11-29T06:10:00.000Z' }, 'slack'));
  const [first] = body.blocks.map((b: any) => b.text.text as string);
  expect(first).toStartWith('*Thread paused by the loop breaker: &lt;!channel&gt; &amp; &lt;https://evil.example|click&gt;&amp;');
  expect(first).not.toContain('<');
  expect(first.length).toBeLessThanOrEqual(3000);
  // Cut once escaped, never inside an escape.
  expect(first.split('\n')[0]).toMatch(/(&amp;)+…\*$/);
  expect(body.blocks).toHaveLength(1);
  const long = { event: 'endpoint.back' as const, agent: 'a', url: `https://x.example/${'y'.repeat(2040)}`, how: 'answered' as const, by: null, at: '2026-11-29T06:10:00.000Z' };
  const cut = JSON.parse(operatorNoticeBody({ id: 'n2', notice: long, createdAt: long.at }, 'slack', 'https://ams.example.com'));
  expect(cut.blocks.map((b: any) => b.text.text.length <= 3000)).toEqual([true, true]);
});
