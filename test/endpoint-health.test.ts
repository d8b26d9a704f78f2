import { expect, test } from 'bun:test';
import { setWebhook } from '../src/domain/agents/agents';
import { enableWebhook } from '../src/domain/agents/webhook-switch';
import {
  countEndpoints,
  disabledReason,
  endpointHealthOf,
  shareUnderMs,
  spell,
  sweepEndpointHealth,
} from '../src/domain/agents/endpoint-health';
import { owedDoorbell, recordAttempt } from '../src/domain/deliveries/delivery-steps';
import { overview } from '../src/domain/deliveries/overview';
import { invitePerson } from '../src/domain/people/people';
import { deliveryProgress } from '../src/domain/deliveries/delivery-progress';
import { parkNotifyJob } from '../src/domain/deliveries/notify-jobs';
import { afterAttempt, failureKind, type AttemptOutcome } from '../src/domain/deliveries/retry-policy';
import { loadConfig } from '../src/config';
import { createLogger } from '../src/log';
import { createMailer } from '../src/mailer';
import { endpointAlertsTask } from '../src/webhooks/endpoint-alerts';
import { uniqueName, useHarness, type TestAgent } from './support/harness';
import { eventually } from './support/receiver';
import { readMail, smtpSink } from './support/smtp';
import { deliveryRow, post, rewind } from './support/webhooks';
import { BY_CLI } from '../src/domain/people/audit';
import { onPrimary } from '../src/db/connect';

// Endpoint health (src/domain/agents/endpoint-health.ts) against a known attempt history, the
// warning stages and the switch-off, switching back on with the failed deliveries resent, and the
// overview that groups the trouble. Attempts are recorded through the domain as the worker
// records them, with the times the test chooses; no worker runs here.
const h = useHarness();
const hook = 'http://127.0.0.1:9/hook';
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
// The service's defaults: warned after an hour and a day, switched off after five days.
const READING = { warnAfterMs: [HOUR, 24 * HOUR], disableAfterMs: 5 * 24 * HOUR, slowMs: 2_000, stalledAfterMs: 300_000 };

async function hooked(name: string) {
  const sender = await h.agent(uniqueName(`${name}-sender`));
  const recipient = await h.agent(uniqueName(name), { webhookUrl: hook });
  const [agent] = await h.db.sql<{ id: string }[]>`select id from agents where username = ${recipient.username}`;
  return { sender, recipient, agentId: agent!.id };
}

const ok = (): AttemptOutcome => ({ status: 200, error: null });
const http = (status: number): AttemptOutcome => ({ status, error: null });
const timedOut = (): AttemptOutcome => ({ status: null, error: 'no answer within 300 ms (timed out)' });

// Posts one message to `recipient` and records one attempt of its doorbell, `agoMs` ago, taking
// `durationMs`; `last` makes a failure the delivery's last attempt (Failed).
async function attempt(sender: TestAgent, recipient: TestAgent, agoMs: number, durationMs: number, outcome: AttemptOutcome, opts: { last?: boolean; webhookVersion?: string } = {}) {
  const { deliveryId } = await post(h, sender, recipient, { content: 'ring' });
  const owed = (await owedDoorbell(h.db.sql, deliveryId))!;
  const next = afterAttempt(outcome, owed.attempt, { delaysMs: opts.last ? [] : [60_000] });
  await recordAttempt(h.db.sql, {
    deliveryId,
    endpoint: { agentId: owed.recipientId, webhookVersion: opts.webhookVersion ?? owed.webhookVersion, url: owed.url },
    publish: owed.publish,
    attempt: owed.attempt,
    resend: owed.resend,
    attemptedAt: new Date(Date.now() - agoMs),
    durationMs,
    outcome,
    next,
  });
  return deliveryId;
}

const at = (agoMs: number, durationMs: number, recordedAt: number) => recordedAt - agoMs + durationMs;

test('the figures of an endpoint follow its attempt log: last success and failure, the failing spell, the hour and the day', async () => {
  const { sender, recipient, agentId } = await hooked('figures');
  expect((await endpointHealthOf(h.db.sql, [agentId], READING)).get(agentId)!.state).toBe('untried');
  const start = Date.now();
  await attempt(sender, recipient, 3 * HOUR, 40, ok());
  await attempt(sender, recipient, 20 * MINUTE, 120, ok());
  await attempt(sender, recipient, 10 * MINUTE, 300, http(500));
  await attempt(sender, recipient, 5 * MINUTE, 700, timedOut());
  const health = (await endpointHealthOf(h.db.sql, [agentId], READING)).get(agentId)!;
  const near = (iso: string | null, ms: number) => Math.abs(new Date(iso!).getTime() - ms) < 2_000;
  expect(health.state).toBe('failing');
  expect(near(health.lastSuccessAt, at(20 * MINUTE, 120, start))).toBe(true);
  expect(near(health.failingSince, at(10 * MINUTE, 300, start))).toBe(true);
  expect(near(health.lastFailureAt, at(5 * MINUTE, 700, start))).toBe(true);
  expect([health.lastFailureStatus, health.lastFailureError, health.consecutiveFailures]).toEqual([null, 'no answer within 300 ms (timed out)', 2]);
  expect([health.warnedStage, health.disabledAt, health.disabledReason]).toEqual([0, null, null]);
  // The hour: 120, 300 and 700 ms, one of three answered 2xx; mean and max exact, 95 % under the
  // bound of the bucket holding the third.
  expect(health.lastHour).toEqual({ attempts: 3, successes: 1, successRate: 1 / 3, timed: 3, meanMs: 373, maxMs: 700, p95UnderMs: 1_000 });
  // The day adds the 40 ms success three hours ago.
  expect(health.lastDay).toEqual({ attempts: 4, successes: 2, successRate: 0.5, timed: 4, meanMs: 290, maxMs: 700, p95UnderMs: 1_000 });
  // The recent attempts' true figures: durations some attempt took.
  expect({ ...health.recent, since: undefined }).toEqual({ attempts: 4, since: undefined, p50Ms: 120, p95Ms: 700, maxMs: 700 });
  expect(near(health.recent.since, start - 3 * HOUR)).toBe(true);
  expect(health.switchesOffAt).toBe(new Date(new Date(health.failingSince!).getTime() + 5 * 24 * HOUR).toISOString());

  // A success ends the spell; the next failure starts another.
  await attempt(sender, recipient, 0, 80, ok());
  const healed = (await endpointHealthOf(h.db.sql, [agentId], READING)).get(agentId)!;
  expect([healed.state, healed.failingSince, healed.consecutiveFailures, healed.lastFailureStatus]).toEqual(['healthy', null, 0, null]);
  expect(healed.lastHour.attempts).toBe(4);
});

test('an attempt sent to a webhook since saved again counts for nothing, and saving a webhook starts its health afresh', async () => {
  const { sender, recipient, agentId } = await hooked('stale');
  await attempt(sender, recipient, 0, 90, http(503));
  expect((await endpointHealthOf(h.db.sql, [agentId], READING)).get(agentId)!.consecutiveFailures).toBe(1);
  await attempt(sender, recipient, 0, 90, http(503), { webhookVersion: '1' });
  expect((await endpointHealthOf(h.db.sql, [agentId], READING)).get(agentId)!.consecutiveFailures).toBe(1);
  await setWebhook(h.db.sql, BY_CLI, recipient.username, 'http://127.0.0.1:9/other', { allowLocal: true });
  const fresh = (await endpointHealthOf(h.db.sql, [agentId], READING)).get(agentId)!;
  expect([fresh.state, fresh.consecutiveFailures, fresh.lastDay.attempts]).toEqual(['untried', 0, 0]);
  const [windows] = await h.db.sql`select count(*)::int as n from endpoint_attempt_windows where agent_id = ${agentId}`;
  expect(windows!.n).toBe(0);
});

test('a histogram says only under which bound a share of attempts fell; none for the open-ended last bucket', () => {
  expect(shareUnderMs([], 0.95)).toBeNull();
  expect(shareUnderMs([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 0.95)).toBeNull();
  expect(shareUnderMs([4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 0.95)).toBe(50);
  // 19 of 20 under 50 ms: 95 % are; the 20th may be anywhere.
  expect(shareUnderMs([19, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], 0.95)).toBe(50);
  expect(shareUnderMs([18, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2], 0.95)).toBeNull();
  expect(shareUnderMs([1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0], 0.95)).toBe(100);
  expect([spell(432_000_000), spell(3_600_000), spell(90_000), spell(90_500), spell(1_000), spell(200)]).toEqual([
    '5 days', '1 hour', '90 seconds', '1.5 minutes', '1 second', '200 milliseconds',
  ]);
  expect([failureKind({ status: 500, error: null }), failureKind({ status: null, error: 'connection failed (ECONNREFUSED): connect ECONNREFUSED 127.0.0.1:9' })]).toEqual([
    'HTTP 500', 'connection failed (ECONNREFUSED)',
  ]);
});

test('a failing webhook warns once per stage, is switched off after its spell, and a person switches it back on with what failed resent', async () => {
  const { sender, recipient, agentId } = await hooked('switched');
  const before = await countEndpoints(h.db.sql, READING);
  // Failing for two hours; the delivery of the last attempt is Failed.
  await attempt(sender, recipient, 2 * HOUR, 100, http(500));
  const failed = await attempt(sender, recipient, 0, 100, http(500), { last: true });
  expect((await deliveryRow(h, failed)).step).toBe('failed');
  const rule = { warnAfterMs: [HOUR, 24 * HOUR], disableAfterMs: 5 * 24 * HOUR };
  const mine = async (r: typeof rule) => (await sweepEndpointHealth(h.db.sql, r)).filter((t) => t.agentId === agentId);

  const [warned, ...more] = await mine(rule);
  expect(more).toEqual([]);
  const told = (await endpointHealthOf(h.db.sql, [agentId], READING)).get(agentId)!;
  expect([told.warnedStage, told.warnStages, told.lastFailureStatus]).toEqual([1, 2, 500]);
  expect(Math.abs(new Date(told.warnedAt!).getTime() - Date.now())).toBeLessThan(10_000);
  expect(told.switchesOffAt).toBe(new Date(new Date(told.failingSince!).getTime() + 5 * 24 * HOUR).toISOString());
  expect({ ...warned, failingSince: undefined }).toEqual({
    agentId, username: recipient.username, url: hook, transition: 'warned', stage: 1, failingSince: undefined,
    lastFailureStatus: 500, lastFailureError: null,
  });
  // Warned once per stage.
  expect(await mine(rule)).toEqual([]);

  const short = { ...rule, disableAfterMs: HOUR };
  const [disabled] = await mine(short);
  expect([disabled!.transition, disabled!.stage]).toEqual(['disabled', 1]);
  expect(await mine(short)).toEqual([]);
  const health = (await endpointHealthOf(h.db.sql, [agentId], READING)).get(agentId)!;
  expect([health.state, health.disabledReason, health.switchesOffAt]).toEqual(['disabled', disabledReason({ disableAfterMs: HOUR }), null]);
  expect(health.disabledReason).toBe('It answered no attempt with 2xx for 1 hour, so no more doorbells were sent and the agent polls instead.');
  const after = await countEndpoints(h.db.sql, READING);
  expect(after.disabled - before.disabled).toBe(1);

  // Switched off, the agent polls: a new message owes no doorbell and queues no job.
  const { deliveryId: polled } = await post(h, sender, recipient, { content: 'while off' });
  const [row] = await h.db.sql`
    select d.webhook, exists (select 1 from graphile_worker.jobs j where j.key = 'notify:' || d.id) as job
    from deliveries d where d.id = ${polled}`;
  expect(row).toEqual({ webhook: false, job: false });
  expect(await owedDoorbell(h.db.sql, failed)).toBeNull();

  // Switched back on with the failed resent (and no test event: the person says so): the Failed
  // delivery is Accepted again with a job, the spell goes on, and doorbells are owed again.
  const enabled = await enableWebhook(h.db.sql, BY_CLI, recipient.username, { resendFailed: true, withoutPassingTest: true });
  expect(enabled).toEqual({ username: recipient.username, enabled: true, passingTest: false, resent: 1, refused: [] });
  expect((await deliveryRow(h, failed)).step).toBe('accepted');
  const [job] = await h.db.sql`select count(*)::int as n from graphile_worker.jobs where key = ${'notify:' + failed}`;
  expect(job!.n).toBe(1);
  const back = (await endpointHealthOf(h.db.sql, [agentId], READING)).get(agentId)!;
  expect([back.state, back.failingSince, back.consecutiveFailures, back.warnedStage]).toEqual(['failing', health.failingSince, 2, 1]);
  const { deliveryId: rung } = await post(h, sender, recipient, { content: 'back on' });
  const [rungRow] = await h.db.sql<{ webhook: boolean }[]>`select webhook from deliveries where id = ${rung}`;
  expect(rungRow!.webhook).toBe(true);
  await expect(enableWebhook(h.db.sql, BY_CLI, recipient.username, { resendFailed: false, withoutPassingTest: true })).rejects.toThrow(
    `${recipient.username}'s webhook is not switched off.`,
  );
});

test('the warning and the switch-off reach every person by email, over SMTP, saying what failed and where to act', async () => {
  const sink = smtpSink();
  try {
    await invitePerson(h.db.sql, BY_CLI, { email: 'ops@example.com', username: uniqueName('ops') });
    const { sender, recipient } = await hooked('mailed');
    await attempt(sender, recipient, 2 * HOUR, 100, http(503));
    await attempt(sender, recipient, 0, 100, http(503), { last: true });
    const config = loadConfig({ SMTP_URL: sink.url, SMTP_FROM: 'Agent Messaging Service <ams@example.com>' });
    const lines: Record<string, unknown>[] = [];
    const log = createLogger('info', (line) => lines.push(JSON.parse(line)));
    const sweep = (disableAfterMs: number) =>
      endpointAlertsTask({ sql: h.db.sql, log, mailer: createMailer(config, log), rule: { warnAfterMs: [HOUR], disableAfterMs }, publicUrl: 'https://ams.example.com' })({}, {} as never);
    const people = (await h.db.sql<{ email: string }[]>`select email from people order by email`).map((p) => p.email);
    // Other tests' endpoints may be swept too: only this one's mail is read.
    const about = (subject: string) => sink.received.filter((m) => readMail(m).subject === `${subject}: ${recipient.username}`);

    await sweep(5 * 24 * HOUR);
    await sink.waitFor(() => about('Webhook failing').length === people.length);
    const warnings = about('Webhook failing');
    expect(warnings.flatMap((m) => m.to).sort()).toEqual(people);
    expect(warnings[0]!.from).toBe('ams@example.com');
    const warning = readMail(warnings[0]!).text;
    expect(warning).toMatch(new RegExp(`^${recipient.username}'s webhook \\(${hook.replaceAll('.', '\\.')}\\) has answered no attempt with 2xx since `));
    expect(warning).toContain('; the last attempt: the handler answered HTTP 503. Unless it answers, it will be switched off after 5 days of failing.');
    expect(warning).toContain('https://ams.example.com/dashboard/agents');

    await sweep(HOUR);
    await sink.waitFor(() => about('Webhook switched off').length === people.length);
    expect(readMail(about('Webhook switched off')[0]!).text).toContain(
      'It was switched off: no more doorbells go to it and the agent\'s messages wait in its inbox.',
    );
    await eventually(async () => lines.filter((l) => l.event === 'webhook_disabled_mail_sent').length === people.length);
    expect(lines.filter((l) => l.event === 'webhook_disabled_mail_sent').map((l) => l.email).sort()).toEqual(people);
  } finally {
    sink.stop();
  }
});

test('with no stage and no switch-off, nothing is warned or switched off however long it fails', async () => {
  const { sender, recipient, agentId } = await hooked('never');
  await attempt(sender, recipient, 30 * 24 * HOUR, 100, http(500));
  const transitions = await sweepEndpointHealth(h.db.sql, { warnAfterMs: [], disableAfterMs: null });
  expect(transitions.filter((t) => t.agentId === agentId)).toEqual([]);
  expect((await endpointHealthOf(h.db.sql, [agentId], READING)).get(agentId)!.state).toBe('failing');
});

test('the overview counts the day by hour and outcome, and lists the trouble by endpoint and failure', async () => {
  const { sender, recipient } = await hooked('overview');
  await attempt(sender, recipient, 30 * MINUTE, 100, http(502));
  await attempt(sender, recipient, 0, 100, http(502), { last: true });
  await attempt(sender, recipient, 0, 100, http(502), { last: true });
  const now = new Date();
  const seen = await overview(onPrimary(h.db.sql), READING, now);
  const binMs = seen.binMinutes * MINUTE;
  expect(new Date(seen.bins.at(-1)!.at).getTime()).toBe(Math.floor(now.getTime() / binMs) * binMs);
  const [counted] = await h.db.sql<{ failed: number; retrying: number }[]>`
    select count(*) filter (where step = 'failed')::int as failed,
           count(*) filter (where step = 'accepted' and next_attempt_at is not null)::int as retrying
    from deliveries where created_at >= ${new Date(seen.since)}`;
  expect(seen.bins.reduce((n, h) => n + h.failed, 0)).toBe(counted!.failed);
  expect(seen.bins.reduce((n, h) => n + h.retrying, 0)).toBe(counted!.retrying);
  const trouble = seen.trouble.find((t) => t.username === recipient.username)!;
  expect({ ...trouble, failingSince: undefined, countedSince: undefined }).toEqual({
    username: recipient.username, url: hook, state: 'failing', failure: 'HTTP 502', disabledAt: null, warnedStage: 0,
    warnStages: 2, warnedAt: null, switchesOffAt: new Date(new Date(trouble.failingSince).getTime() + 5 * 24 * HOUR).toISOString(),
    lastFailureStatus: 502, lastFailureBody: null,
    // The first delivery waits for its retry; the other two Failed.
    deliveries: 3, failingSince: undefined, countedSince: undefined,
  });
});

test('a retry parked behind its endpoint\'s cap reads as waiting for a slot, not as due at a time that has passed', async () => {
  const { sender, recipient } = await hooked('parked');
  const { deliveryId } = await post(h, sender, recipient, { content: 'behind the cap' });
  const [queued] = await deliveryProgress(h.db.sql, [deliveryId], 300_000);
  expect([queued!.waitingForSlot, queued!.retrying]).toEqual([false, false]);
  // A retry fell due a minute ago and was parked, as the worker parks one over its endpoint's cap.
  await rewind(h, deliveryId, { next_attempt_at: new Date(Date.now() - MINUTE) });
  await parkNotifyJob(h.db.sql, { deliveryId }, hook, 60_000);
  const [parked] = await deliveryProgress(h.db.sql, [deliveryId], 300_000);
  expect([parked!.waitingForSlot, parked!.retrying]).toEqual([true, true]);
});
