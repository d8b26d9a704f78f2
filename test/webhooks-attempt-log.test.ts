import { describe, expect, test } from 'bun:test';
import { deliveryProgress, listDeliveries } from '../src/domain/deliveries/delivery-progress';
import { deliveryFilter } from '../src/domain/deliveries/delivery-query';
import { pageQuery } from '../src/domain/shared/keyset';
import { INTERRUPTED, resendDelivery } from '../src/domain/deliveries/delivery-steps';
import { eventually, receiver } from './support/receiver';
import { deliveryRow, post, untilStep, useWorkerHarness } from './support/webhooks';
import { BY_CLI } from '../src/domain/people/audit';

// The attempt log tells an operator what happened: the status, the first KiB of the answer, the
// headers that went out, how long it took, which run it belonged to, and when the next try is due.
const { h } = useWorkerHarness({ WEBHOOK_RETRY_DELAYS_MS: '1500,50,50' });
const hook = receiver();

const progressOf = async (deliveryId: string) => (await deliveryProgress(h.db.sql, [deliveryId], 300_000))[0]!;

describe('the attempt log', () => {
  test('keeps the status, the first KiB of the answer, the headers sent (signatures elided) and the time taken', async () => {
    hook.reply((req) => (req.path === '/verbose' ? new Response(`${'é'.repeat(700)}tail`, { status: 202 }) : new Response('ok')));
    const sender = await h.agent('log-sender');
    const recipient = await h.agent('log-verbose', { webhookUrl: hook.url('/verbose') });
    const { deliveryId } = await post(h, sender, recipient, { content: 'tell me everything' });
    await untilStep(h, deliveryId, 'notified');
    const [attempt] = (await progressOf(deliveryId)).attempts;
    // 1 024 bytes of two-byte characters: 512 of them, and nothing of the tail.
    expect(attempt!.responseBody).toBe('é'.repeat(512));
    expect(attempt!.status).toBe(202);
    expect(attempt!.durationMs).toBeGreaterThanOrEqual(0);
    expect(attempt!.requestHeaders).toMatchObject({
      'Content-Type': 'application/json',
      'User-Agent': expect.stringContaining('agent-messaging-service'),
      'X-Signature-256': '(signature)',
      'webhook-id': deliveryId,
      'webhook-timestamp': expect.stringMatching(/^\d+$/),
      'webhook-signature': '(signature)',
    });
    expect(JSON.stringify(attempt!.requestHeaders)).not.toContain(recipient.signingSecret!);
    expect(attempt).toMatchObject({ publish: 1, attempt: 1, resend: 0, interrupted: false, error: null });
  });

  test('between two attempts a delivery reads as retrying, with the last error and when the next attempt is due', async () => {
    let calls = 0;
    hook.reply((req) => (req.path === '/flaky' && calls++ === 0 ? new Response('down for maintenance', { status: 500 }) : new Response('ok')));
    const sender = await h.agent('retry-sender');
    const recipient = await h.agent('retry-flaky', { webhookUrl: hook.url('/flaky') });
    const { deliveryId } = await post(h, sender, recipient, { content: 'try twice' });
    const retrying = await eventually(async () => {
      const d = await progressOf(deliveryId);
      return d.retrying ? d : null;
    });
    expect(retrying).toMatchObject({ step: 'accepted', lastError: 'the handler answered HTTP 500' });
    const [first] = retrying.attempts;
    expect(first).toMatchObject({ attempt: 1, status: 500, responseBody: 'down for maintenance' });
    // Due 1.5 s after the failed attempt, by the database's clock.
    const due = Date.parse(retrying.nextAttemptAt!) - Date.parse(first!.attemptedAt);
    expect(due).toBeGreaterThanOrEqual(1_400);
    expect(due).toBeLessThan(3_000);
    const filtered = await listDeliveries(h.db.sql, deliveryFilter({ state: 'retrying' }), pageQuery({}), 300_000);
    expect(filtered.items.map((d) => d.id)).toEqual([deliveryId]);

    await untilStep(h, deliveryId, 'notified', 10_000);
    expect(await progressOf(deliveryId)).toMatchObject({ retrying: false, nextAttemptAt: null, lastError: null });
  });

  test("a person's resend is told apart from the first publish", async () => {
    let up = false;
    hook.reply((req) => (req.path === '/resend-log' && !up ? new Response('no', { status: 503 }) : new Response('ok')));
    const sender = await h.agent('resend-log-sender');
    const recipient = await h.agent('resend-log-recipient', { webhookUrl: hook.url('/resend-log') });
    const { deliveryId } = await post(h, sender, recipient, { content: 'fail, then resend' });
    await untilStep(h, deliveryId, 'failed', 10_000);
    up = true;
    await resendDelivery(h.db.sql, BY_CLI, deliveryId);
    await untilStep(h, deliveryId, 'notified');
    const attempts = (await progressOf(deliveryId)).attempts.map((a) => [a.resend, a.publish, a.attempt, a.status]);
    expect(attempts).toEqual([[0, 1, 1, 503], [0, 1, 2, 503], [0, 1, 3, 503], [0, 1, 4, 503], [1, 1, 1, 200]]);
  });

  test('a job run again after its run was cut off logs the cut-off attempt first', async () => {
    hook.reply(() => new Response('ok'));
    const sender = await h.agent('cut-sender');
    const recipient = await h.agent('cut-recipient', { webhookUrl: hook.url('/cut') });
    const { deliveryId } = await post(h, sender, recipient, { content: 'interrupted' });
    await untilStep(h, deliveryId, 'notified');
    // As if a worker had died mid-attempt on a second publish: graphile-worker runs the job again.
    await h.db.sql`
      select graphile_worker.add_job('notify', json_build_object('deliveryId', ${deliveryId}::uuid),
                                     run_at => now() + interval '1 hour', job_key => ${`notify:${deliveryId}`})`;
    await h.db.sql`update graphile_worker._private_jobs set attempts = 1, run_at = now() where key = ${`notify:${deliveryId}`}`;
    const rows = await eventually(async () => {
      const r = (await progressOf(deliveryId)).attempts;
      return r.length === 2 ? r : null;
    });
    // Already Notified, so no doorbell is owed: only the record of the cut-off attempt is added.
    expect(rows[1]).toMatchObject({ attempt: 2, status: null, interrupted: true, error: INTERRUPTED });
    expect((await deliveryRow(h, deliveryId)).sendAttempts).toBe(2);
    expect(hook.received.filter((r) => r.path === '/cut')).toHaveLength(1);
  });

  test('a cut-off attempt that was the last one allowed fails the delivery instead of sending a fifth', async () => {
    const sender = await h.agent('cut-last-sender');
    const poller = await h.agent('cut-last-recipient');
    const { deliveryId } = await post(h, sender, poller, { content: 'three tries already' });
    // A webhook delivery on its fourth and last attempt when its worker died.
    await h.db.sql`update agents set webhook_url = ${hook.url('/cut-last')}, signing_secret = 'whsec_test' where username = ${poller.username}`;
    await h.db.sql`update deliveries set webhook = true, publish_attempts = 1, send_attempts = 3 where id = ${deliveryId}`;
    await h.db.sql`
      select graphile_worker.add_job('notify', json_build_object('deliveryId', ${deliveryId}::uuid),
                                     run_at => now() + interval '1 hour', job_key => ${`notify:${deliveryId}`})`;
    await h.db.sql`update graphile_worker._private_jobs set attempts = 1, run_at = now() where key = ${`notify:${deliveryId}`}`;
    const failed = await untilStep(h, deliveryId, 'failed');
    expect(failed).toMatchObject({
      failedStep: 'accepted',
      sendAttempts: 4,
      error: 'Gave up after 4 attempts; the last one was cut off before its outcome was recorded.',
    });
    expect(hook.received.filter((r) => r.path === '/cut-last')).toHaveLength(0);
  });

  test('a run that failed with an error before sending (the database, say) is no cut-off attempt', async () => {
    hook.reply(() => new Response('ok'));
    const sender = await h.agent('db-error-sender');
    const recipient = await h.agent('db-error-recipient', { webhookUrl: hook.url('/db-error') });
    const { deliveryId } = await post(h, sender, recipient, { content: 'first' });
    await untilStep(h, deliveryId, 'notified');
    await h.db.sql`update deliveries set step = 'delivered', delivered_at = now() where id = ${deliveryId}`;
    // graphile-worker ran it once and recorded that run's error: nothing was on the wire.
    await h.db.sql`
      select graphile_worker.add_job('notify', json_build_object('deliveryId', ${deliveryId}::uuid),
                                     run_at => now() + interval '1 hour', job_key => ${`notify:${deliveryId}`})`;
    await h.db.sql`
      update graphile_worker._private_jobs set attempts = 1, last_error = 'CONNECTION_CLOSED', run_at = now()
      where key = ${`notify:${deliveryId}`}`;
    await eventually(async () => (await h.db.sql`select 1 from graphile_worker.jobs where key = ${`notify:${deliveryId}`}`).length === 0);
    expect((await progressOf(deliveryId)).attempts.map((a) => [a.attempt, a.interrupted])).toEqual([[1, false]]);
  });
});
