import { describe, expect, test } from 'bun:test';
import { runCommand } from '../src/cli/commands';
import { countEndpoints, disabledAgainReason, disabledReason, endpointHealthOf, probationMs, sweepEndpointHealth } from '../src/domain/agents/endpoint-health';
import { recordTestEvent, sendTestEvent, testEventToSend } from '../src/domain/agents/test-events';
import { enableWebhook, pauseWebhook, resumeWebhook } from '../src/domain/agents/webhook-switch';
import { owedDoorbell, recordAttempt, republishStranded } from '../src/domain/deliveries/delivery-steps';
import { afterAttempt, type AttemptOutcome } from '../src/domain/deliveries/retry-policy';
import { BY_CLI, byPerson } from '../src/domain/people/audit';
import { invitePerson } from '../src/domain/people/people';
import type { DomainError } from '../src/domain/shared/errors';
import { silentLogger } from '../src/log';
import { rememberWebhooks } from '../src/webhooks/credentials';
import { endpointSlots } from '../src/webhooks/endpoint-slots';
import { notifier } from '../src/webhooks/notify-task';
import { uniqueName, useHarness, type TestAgent } from './support/harness';
import { eventually, receiver } from './support/receiver';
import { attemptRows, deliveryRow, FAST_WEBHOOKS, post } from './support/webhooks';

// Pausing a webhook by hand and resuming it, switching back on one the service switched off (with
// a passing test, or said to be without one), and what the health sweep does after either
// (src/domain/agents/webhook-switch.ts, endpoint-health.ts). No worker runs here: doorbell jobs are
// run by the test, through the worker's own task, when it chooses.
const h = useHarness(FAST_WEBHOOKS);
const hook = receiver();
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const RULE = { warnAfterMs: [HOUR, 24 * HOUR], disableAfterMs: 5 * 24 * HOUR, slowMs: 2_000, stalledAfterMs: 300_000 };
const ada = { id: '', username: '' };

async function hooked(name: string, url = hook.url(`/${name}`)) {
  const sender = await h.agent(uniqueName(`${name}-sender`));
  const recipient = await h.agent(uniqueName(name), { webhookUrl: url });
  const [agent] = await h.db.sql<{ id: string }[]>`select id from agents where username = ${recipient.username}`;
  return { sender, recipient, agentId: agent!.id };
}

const http = (status: number): AttemptOutcome => ({ status, error: null });

// Posts one message and records one attempt of its doorbell that ended `agoMs` ago, as the worker would.
async function attempt(sender: TestAgent, recipient: TestAgent, agoMs: number, outcome: AttemptOutcome, opts: { last?: boolean } = {}) {
  const { deliveryId } = await post(h, sender, recipient, { content: 'ring' });
  const owed = (await owedDoorbell(h.db.sql, deliveryId))!;
  await recordAttempt(h.db.sql, {
    deliveryId,
    endpoint: { agentId: owed.recipientId, webhookVersion: owed.webhookVersion, url: owed.url },
    publish: owed.publish,
    attempt: owed.attempt,
    resend: owed.resend,
    attemptedAt: new Date(Date.now() - agoMs - 100),
    durationMs: 100,
    outcome,
    next: afterAttempt(outcome, owed.attempt, { delaysMs: opts.last ? [] : [60_000] }),
  });
  return deliveryId;
}

// A test event sent and answered as the worker's task records it.
async function tested(username: string, outcome: AttemptOutcome) {
  const queued = await sendTestEvent(h.db.sql, username, 'ada', 300);
  const event = (await testEventToSend(h.db.sql, queued.id))!;
  await recordTestEvent(h.db.sql, event, { attemptedAt: new Date(), durationMs: 5, outcome });
}

const healthOf = async (agentId: string) => (await endpointHealthOf(h.db.sql, [agentId], RULE)).get(agentId)!;
const mine = async (agentId: string, rule = RULE) => (await sweepEndpointHealth(h.db.sql, rule)).filter((t) => t.agentId === agentId);
const switchRow = async (agentId: string) =>
  (await h.db.sql`
    select webhook_url as url, signing_secret as secret, webhook_disabled_at is not null as off, webhook_disabled_reason as reason,
           webhook_paused_by as "pausedBy", webhook_resumed_at is not null as resumed
    from agents where id = ${agentId}`)[0]!;
const decisions = async (subject: string) => [
  ...(await h.db.sql`select actor, action, before, after, reason from audit_events where subject = ${subject} order by id`),
];
const hasJob = async (deliveryId: string) => (await h.db.sql`select 1 from graphile_worker.jobs where key = ${'notify:' + deliveryId}`).length > 0;
const webhookFlag = async (deliveryId: string) => (await h.db.sql<{ webhook: boolean }[]>`select webhook from deliveries where id = ${deliveryId}`)[0]!.webhook;

describe('pausing by hand', () => {
  test('a paused webhook owes no doorbell and keeps its URL and secret; a test event still goes out; resume rings what comes next, and what came meanwhile waits in the inbox', async () => {
    const username = uniqueName('ada');
    await invitePerson(h.db.sql, BY_CLI, { email: `${username}@example.com`, username });
    const [person] = await h.db.sql<{ id: string }[]>`select id from people where username = ${username}`;
    Object.assign(ada, { id: person!.id, username });
    const { sender, recipient, agentId } = await hooked('paused');
    const before = await switchRow(agentId);
    const counted = await countEndpoints(h.db.sql, RULE);

    const paused = await pauseWebhook(h.db.sql, byPerson(ada), recipient.username, '  deploying the handler  ');
    expect(paused).toEqual({ username: recipient.username, paused: true, pausedAt: expect.any(String), pausedBy: ada.username, reason: 'deploying the handler' });
    expect(await switchRow(agentId)).toEqual({ url: before.url, secret: before.secret, off: true, reason: 'deploying the handler', pausedBy: ada.username, resumed: false });
    const health = await healthOf(agentId);
    expect([health.state, health.disabledAt, health.disabledReason, health.pausedBy]).toEqual(['paused', paused.pausedAt, 'deploying the handler', ada.username]);
    const now = await countEndpoints(h.db.sql, RULE);
    expect([now.paused - counted.paused, now.disabled - counted.disabled]).toEqual([1, 0]);

    // Accepted while paused: for the inbox, no doorbell owed, no job.
    const { deliveryId: waiting } = await post(h, sender, recipient, { content: 'while paused' });
    expect([await webhookFlag(waiting), await hasJob(waiting), await owedDoorbell(h.db.sql, waiting)]).toEqual([false, false, null]);
    const inbox = await h.call('GET', '/api/deliveries', { key: recipient.key });
    expect(inbox.body.data.map((d: { deliveryId: string }) => d.deliveryId)).toEqual([waiting]);

    // The health sweep leaves a paused webhook alone, however long it has failed.
    await h.db.sql`insert into endpoint_health (agent_id, consecutive_failures, failing_since, last_failure_at, last_failure_status)
                   values (${agentId}, 1, now() - interval '30 days', now() - interval '30 days', 503)`;
    expect(await mine(agentId)).toEqual([]);
    await h.db.sql`delete from endpoint_health where agent_id = ${agentId}`;

    // A test event goes to a paused webhook.
    await tested(recipient.username, http(200));
    expect((await healthOf(agentId)).state).toBe('paused');

    const resumed = await resumeWebhook(h.db.sql, BY_CLI, recipient.username, { resendFailed: false });
    expect(resumed).toEqual({ username: recipient.username, resumed: true, resent: 0, refused: [] });
    expect(await switchRow(agentId)).toEqual({ url: before.url, secret: before.secret, off: false, reason: null, pausedBy: null, resumed: true });
    expect((await healthOf(agentId)).state).toBe('healthy');
    const { deliveryId: rung } = await post(h, sender, recipient, { content: 'after resume' });
    expect([await webhookFlag(rung), await hasJob(rung)]).toEqual([true, true]);
    expect([await webhookFlag(waiting), await hasJob(waiting)]).toEqual([false, false]);

    expect(await decisions(recipient.username)).toEqual([
      { actor: 'cli', action: 'agent.create', before: null, after: { webhookUrl: before.url }, reason: null },
      { actor: ada.username, action: 'agent.webhook.pause', before: { state: 'active' }, after: { state: 'paused' }, reason: 'deploying the handler' },
      { actor: 'cli', action: 'agent.webhook.resume', before: { state: 'paused', pausedBy: ada.username }, after: { state: 'active', resent: 0 }, reason: null },
    ]);
  });

  test('each refusal is a sentence and changes nothing', async () => {
    const { recipient, agentId } = await hooked('refused');
    const polling = await h.agent(uniqueName('refused-polling'));
    const refused = (p: Promise<unknown>) => p.then(() => 'accepted', (e: DomainError) => [e.kind, e.message]);
    expect(await refused(pauseWebhook(h.db.sql, BY_CLI, 'no-such-agent', null))).toEqual(['not_found', 'No agent named no-such-agent.']);
    expect(await refused(pauseWebhook(h.db.sql, BY_CLI, polling.username, null))).toEqual(['conflict', `${polling.username} has no webhook to pause.`]);
    expect(await refused(pauseWebhook(h.db.sql, BY_CLI, recipient.username, 'x'.repeat(501)))).toEqual(['invalid', 'reason must be text of at most 500 characters']);
    expect(await refused(pauseWebhook(h.db.sql, BY_CLI, recipient.username, 7))).toEqual(['invalid', 'reason must be text of at most 500 characters']);
    expect(await refused(resumeWebhook(h.db.sql, BY_CLI, recipient.username, { resendFailed: false }))).toEqual(['conflict', `${recipient.username}'s webhook is not paused.`]);
    expect((await switchRow(agentId)).off).toBe(false);

    await pauseWebhook(h.db.sql, BY_CLI, recipient.username, '');
    expect((await switchRow(agentId)).reason).toBeNull();
    expect(await refused(pauseWebhook(h.db.sql, BY_CLI, recipient.username, null))).toEqual(['conflict', `${recipient.username}'s webhook is already paused.`]);
    expect(await refused(enableWebhook(h.db.sql, BY_CLI, recipient.username, { resendFailed: false, withoutPassingTest: true }))).toEqual([
      'conflict', `${recipient.username}'s webhook was paused by cli, not switched off: resume it instead.`,
    ]);

    // Switched off by the service: neither paused again nor resumed.
    await h.db.sql`update agents set webhook_paused_by = null, webhook_disabled_reason = 'failing' where id = ${agentId}`;
    expect(await refused(pauseWebhook(h.db.sql, BY_CLI, recipient.username, null))).toEqual([
      'conflict', `${recipient.username}'s webhook is already switched off by the service: no doorbells go to it.`,
    ]);
    expect(await refused(resumeWebhook(h.db.sql, BY_CLI, recipient.username, { resendFailed: false }))).toEqual([
      'conflict', `${recipient.username}'s webhook was switched off by the service, not paused: switch it back on instead.`,
    ]);
    expect((await decisions(recipient.username)).map((d) => d.action)).toEqual(['agent.create', 'agent.webhook.pause']);
  });

  test('a pause racing doorbell jobs is decided by its commit: a job that asks before it rings, one that asks after does not, and one on the wire gets no retry', async () => {
    const { sender, recipient, agentId } = await hooked('race');
    let open = () => {};
    const gate = new Promise<void>((resolve) => (open = resolve));
    const path = `/race`;
    hook.reply(async (req) => {
      if (req.path !== path) return new Response('ok');
      // The first doorbell is held on the wire until the pause has committed, then fails.
      if (hook.received.filter((r) => r.path === req.path).length === 1) {
        await gate;
        return new Response('busy', { status: 503 });
      }
      return new Response('ok');
    });
    const ids: string[] = [];
    for (const content of ['on the wire', 'asks before the commit', 'asks after, prepared', 'asks after, loaded']) {
      ids.push((await post(h, sender, recipient, { content })).deliveryId);
    }
    const [onWire, before, afterPrepared, afterLoaded] = ids as [string, string, string, string];
    const payloads = new Map(
      (await h.db.sql<{ key: string; payload: any }[]>`select key, payload from graphile_worker._private_jobs where key = any(${ids.map((id) => 'notify:' + id)})`).map(
        (j) => [j.key.slice('notify:'.length), j.payload],
      ),
    );
    const [agent] = await h.db.sql`select webhook_url, signing_secret from agents where id = ${agentId}`;
    const version = payloads.get(onWire).doorbell.webhookVersion;
    const worker = (known: boolean) => {
      const credentials = rememberWebhooks();
      if (known) credentials.remember(agentId, version, { url: agent!.webhook_url, secrets: { current: agent!.signing_secret, previous: null, previousUntil: null }, secretVersion: '' });
      return notifier({
        sql: h.db.sql,
        doorbellStatements: { owed: h.db.sql, record: h.db.sql },
        log: silentLogger,
        send: { policy: { allowLocal: true }, timeoutMs: 5_000 },
        retryPolicy: { delaysMs: [50, 100, 150] },
        onRetryScheduled: () => {},
        credentials,
        slots: endpointSlots({ slowCap: 4, fastCap: 16, reserve: 16 }),
        parkedForMs: 60_000,
        nudge: () => {},
      }).task;
    };
    const run = (known: boolean, deliveryId: string) => {
      const now = new Date();
      return worker(known)(payloads.get(deliveryId), { job: { attempts: 1, created_at: now, locked_at: now } } as never);
    };
    const rungTo = () => hook.received.filter((r) => r.path === path).length;

    const wire = run(true, onWire);
    await eventually(async () => rungTo() === 1);

    // The pause has written its row but not committed: it waits on the audit trail, held here.
    let unblock = () => {};
    const held = new Promise<void>((resolve) => (unblock = resolve));
    const locked = new Promise<void>((resolve) => {
      void h.db.sql.begin(async (tx) => {
        await tx`lock table audit_events in exclusive mode`;
        resolve();
        await held;
      });
    });
    await locked;
    const pausing = pauseWebhook(h.db.sql, BY_CLI, recipient.username, 'race');
    await eventually(async () =>
      (await h.db.sql`select 1 from pg_stat_activity where wait_event_type = 'Lock' and query like '%insert into audit_events%'`).length > 0,
    );
    await run(true, before);
    expect(rungTo()).toBe(2);
    expect((await deliveryRow(h, before)).step).toBe('notified');

    unblock();
    await pausing;
    await run(true, afterPrepared);
    await run(false, afterLoaded);
    expect(rungTo()).toBe(2);
    for (const id of [afterPrepared, afterLoaded]) {
      expect(await attemptRows(h, id)).toEqual([]);
      expect((await deliveryRow(h, id)).step).toBe('accepted');
    }

    // The doorbell on the wire ends with its 503 recorded and no retry queued: none is owed.
    open();
    await wire;
    expect((await attemptRows(h, onWire)).map((a) => a.status)).toEqual([503]);
    const [row] = await h.db.sql`select step, next_attempt_at from deliveries where id = ${onWire}`;
    expect([row!.step, row!.next_attempt_at]).toEqual(['accepted', null]);
    expect(rungTo()).toBe(2);

    // Resumed: what was accepted during the pause waits in the inbox; the doorbells the pause
    // stopped are owed again, and the re-publish sweep queues them.
    const { deliveryId: duringPause } = await post(h, sender, recipient, { content: 'during the pause' });
    await resumeWebhook(h.db.sql, BY_CLI, recipient.username, { resendFailed: false });
    await republishStranded(h.db.sql, { publishAttempts: 3, minAgeMs: 0 });
    expect(await Promise.all([onWire, afterPrepared, afterLoaded, duringPause].map(hasJob))).toEqual([true, true, true, false]);
    hook.reply(() => new Response('ok'));
  });
});

describe('switching back on', () => {
  // Failing for six days, switched off by the sweep; its last delivery Failed.
  async function switchedOff(name: string) {
    const ctx = await hooked(name);
    await attempt(ctx.sender, ctx.recipient, 6 * 24 * HOUR, http(500));
    const failed = await attempt(ctx.sender, ctx.recipient, 2 * HOUR, http(500), { last: true });
    expect((await mine(ctx.agentId)).map((t) => t.transition)).toEqual(['disabled']);
    return { ...ctx, failed };
  }

  test('asks for a passing test since the switch-off, or for the person to say there is none; resending is a choice', async () => {
    const { recipient, agentId, failed } = await switchedOff('asks');
    const refused = (p: Promise<unknown>) => p.then(() => 'accepted', (e: DomainError) => [e.kind, e.message]);
    const enable = (opts: { resendFailed?: boolean; withoutPassingTest?: boolean } = {}) =>
      enableWebhook(h.db.sql, BY_CLI, recipient.username, { resendFailed: false, withoutPassingTest: false, ...opts });
    expect(await refused(enable())).toEqual([
      'conflict', `No test event has been sent to ${recipient.username}'s webhook since it was switched off: send a test event, or switch it back on without a passing test.`,
    ]);
    await sendTestEvent(h.db.sql, recipient.username, 'ada', 300);
    expect(await refused(enable())).toEqual([
      'conflict', `The test event to ${recipient.username}'s webhook is still on its way: wait for its answer, or switch it back on without a passing test.`,
    ]);
    await h.db.sql`update endpoint_test_events set attempted_at = now(), status = 502 where agent_id = ${agentId}`;
    expect(await refused(enable())).toEqual([
      'conflict', `The last test event to ${recipient.username}'s webhook since it was switched off was not answered with 2xx (HTTP 502): send a test event, or switch it back on without a passing test.`,
    ]);
    expect((await switchRow(agentId)).off).toBe(true);

    // A passing test: switched on; the Failed delivery is not resent unless asked for.
    await tested(recipient.username, http(204));
    const health = await healthOf(agentId);
    // The badge's reason survives the passing test until the webhook is switched back on.
    expect([health.state, health.disabledReason, health.lastFailureStatus, health.failingSince]).toEqual([
      'disabled', disabledReason({ disableAfterMs: RULE.disableAfterMs }), 500, null,
    ]);
    expect(await enable()).toEqual({ username: recipient.username, enabled: true, passingTest: true, resent: 0, refused: [] });
    expect((await deliveryRow(h, failed)).step).toBe('failed');
    expect((await healthOf(agentId)).state).toBe('healthy');
    expect((await decisions(recipient.username)).at(-1)).toEqual({
      actor: 'cli', action: 'agent.webhook.enable', before: { switchedOff: true }, after: { switchedOff: false, resent: 0, passingTest: true }, reason: null,
    });
  });

  test('a still-dead endpoint switched back on is switched off again after the first warning stage, not after another five days', async () => {
    const { sender, recipient, agentId, failed } = await switchedOff('dead');
    const spell = (await healthOf(agentId)).failingSince;
    const enabled = await enableWebhook(h.db.sql, BY_CLI, recipient.username, { resendFailed: true, withoutPassingTest: true });
    expect(enabled).toEqual({ username: recipient.username, enabled: true, passingTest: false, resent: 1, refused: [] });
    expect((await deliveryRow(h, failed)).step).toBe('accepted');
    // The spell goes on, its warnings already given: no new warning, and no switch-off at once.
    const back = await healthOf(agentId);
    expect([back.state, back.failingSince, back.warnedStage]).toEqual(['failing', spell!, 2]);
    expect(await mine(agentId)).toEqual([]);

    // Nothing has failed since the switch-on, however long ago: nothing to judge it by.
    await h.db.sql`update agents set webhook_resumed_at = now() - interval '2 hours' where id = ${agentId}`;
    expect(await mine(agentId)).toEqual([]);
    // It fails again; within the first warning stage since the switch-on it stays on.
    await h.db.sql`update agents set webhook_resumed_at = now() - interval '30 minutes' where id = ${agentId}`;
    await attempt(sender, recipient, 0, http(500));
    expect(await mine(agentId)).toEqual([]);
    // An hour after the switch-on, still failing: off again, saying why.
    await h.db.sql`update agents set webhook_resumed_at = now() - interval '61 minutes' where id = ${agentId}`;
    const [again] = await mine(agentId);
    expect([again!.transition, again!.failingSince]).toEqual(['disabled', spell!]);
    const off = await healthOf(agentId);
    expect([off.state, off.disabledReason]).toEqual(['disabled', disabledAgainReason(RULE)]);
    expect(off.disabledReason).toBe(
      'Switched back on while failing, it failed again and answered nothing with 2xx within 1 hour, so no more doorbells were sent and the agent polls instead.',
    );
    expect([probationMs(RULE), probationMs({ warnAfterMs: [], disableAfterMs: HOUR }), probationMs({ warnAfterMs: [2 * HOUR], disableAfterMs: HOUR })]).toEqual([
      HOUR, HOUR, HOUR,
    ]);
  });

  test('one that answers after the switch-on ends its spell, and a later spell gets the whole time again', async () => {
    const { sender, recipient, agentId } = await switchedOff('answers');
    await enableWebhook(h.db.sql, BY_CLI, recipient.username, { resendFailed: false, withoutPassingTest: true });
    await h.db.sql`update agents set webhook_resumed_at = now() - interval '3 hours' where id = ${agentId}`;
    await attempt(sender, recipient, 2 * HOUR, http(200));
    await attempt(sender, recipient, 90 * MINUTE, http(500));
    // Failing 90 minutes, in a spell that began after the switch-on: warned, not switched off.
    expect((await mine(agentId)).map((t) => [t.transition, t.stage])).toEqual([['warned', 1]]);
    expect((await healthOf(agentId)).state).toBe('failing');
  });

  test('a webhook resumed in a failing spell is held to the same rule', async () => {
    const { sender, recipient, agentId } = await hooked('resumed-failing');
    await attempt(sender, recipient, 3 * HOUR, http(500));
    await pauseWebhook(h.db.sql, BY_CLI, recipient.username, null);
    await resumeWebhook(h.db.sql, BY_CLI, recipient.username, { resendFailed: false });
    // Failing three hours: the first stage is warned of, as it would have been without the pause.
    expect((await mine(agentId)).map((t) => t.transition)).toEqual(['warned']);
    await h.db.sql`update agents set webhook_resumed_at = now() - interval '2 hours' where id = ${agentId}`;
    await attempt(sender, recipient, 0, http(500));
    expect((await mine(agentId)).map((t) => t.transition)).toEqual(['disabled']);
    expect((await healthOf(agentId)).disabledReason).toBe(disabledAgainReason(RULE));
  });
});

describe('the ams commands', () => {
  const run = (...argv: string[]) => runCommand({ sql: h.db.sql, config: h.config }, argv);

  test('webhooks pause, resume and enable', async () => {
    const { recipient, agentId } = await hooked('cli');
    expect(await run('webhooks', 'pause', recipient.username, '--reason', 'handler redeploy')).toEqual({
      username: recipient.username, paused: true, pausedAt: expect.any(String), pausedBy: 'cli', reason: 'handler redeploy',
    });
    await expect(run('webhooks', 'resume', recipient.username, '--resend-failed', 'maybe')).rejects.toThrow('--resend-failed takes yes or no, not "maybe".');
    expect(await run('webhooks', 'resume', recipient.username, '--resend-failed', 'yes')).toEqual({ username: recipient.username, resumed: true, resent: 0, refused: [] });
    await expect(run('webhooks', 'resume', recipient.username)).rejects.toThrow(`${recipient.username}'s webhook is not paused.`);

    await h.db.sql`update agents set webhook_disabled_at = now(), webhook_disabled_reason = 'failing' where id = ${agentId}`;
    await expect(run('webhooks', 'enable', recipient.username)).rejects.toThrow(
      `No test event has been sent to ${recipient.username}'s webhook since it was switched off: send a test event, or switch it back on without a passing test.`,
    );
    expect(await run('webhooks', 'enable', recipient.username, '--without-passing-test', 'yes')).toEqual({
      username: recipient.username, enabled: true, passingTest: false, resent: 0, refused: [],
    });
    expect((await switchRow(agentId)).off).toBe(false);
  });
});
