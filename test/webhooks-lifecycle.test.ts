import { describe, expect, test } from 'bun:test';
import { removeWebhook, setWebhook } from '../src/domain/agents/agents';
import { republishStranded } from '../src/domain/deliveries/delivery-steps';
import { eventually, receiver } from './support/receiver';
import { attemptRows, deliveryRow, post, rewind, untilStep, useWorkerHarness, sign } from './support/webhooks';
import { BY_CLI } from '../src/domain/people/audit';

const { h } = useWorkerHarness();
const hook = receiver();

async function cli(...args: string[]) {
  const proc = Bun.spawn(['bun', 'src/main.ts', ...args], {
    env: { ...process.env, DATABASE_URL: h.db.url, WEBHOOK_ALLOW_LOCAL: 'true', LOG_LEVEL: 'error' },
    stdout: 'pipe',
    stderr: 'pipe',
  });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, out: out.trim(), err: err.trim() };
}

describe('resend', () => {
  test('`deliveries resend` puts a Failed delivery back to Accepted and rings again, attempts counted afresh, history kept', async () => {
    let up = false;
    hook.reply((req) => (req.path === '/resend' && !up ? new Response('down', { status: 500 }) : new Response('ok')));
    const sender = await h.agent('resend-sender');
    const recipient = await h.agent('resend-recipient', { webhookUrl: hook.url('/resend') });
    const { deliveryId } = await post(h, sender, recipient, { content: 'try again later' });
    await untilStep(h, deliveryId, 'failed');

    up = true;
    const resent = await cli('deliveries', 'resend', deliveryId);
    expect(resent).toEqual({ code: 0, out: JSON.stringify({ deliveryId, step: 'accepted' }), err: '' });
    const d = await untilStep(h, deliveryId, 'notified');
    expect(d).toMatchObject({ failedStep: null, publishAttempts: 1, sendAttempts: 1 });
    expect((await attemptRows(h, deliveryId)).map((a) => [a.publish, a.attempt, a.status])).toEqual([
      [1, 1, 500], [1, 2, 500], [1, 3, 500], [1, 4, 500], [1, 1, 200],
    ]);

    const again = await cli('deliveries', 'resend', deliveryId);
    expect(again).toEqual({ code: 1, out: '', err: 'Only a failed delivery can be resent; this one is notified.' });
  });
});

describe('webhook remove and re-add', () => {
  test('removing returns the agent to polling; a doorbell signed with the old secret is refused (401), Failed at Accepted, and resent with the new one', async () => {
    // The handler as deployed: it knows one secret and answers 401 to anything else.
    let handlerSecret = '';
    hook.reply((req) =>
      req.path === '/rotating' && req.headers.get('x-signature-256') !== sign(req.raw, handlerSecret)
        ? new Response('bad signature', { status: 401 })
        : new Response('ok'),
    );
    const sender = await h.agent('rotate-sender');
    const recipient = await h.agent('rotate-recipient', { webhookUrl: hook.url('/rotating') });
    const oldSecret = recipient.signingSecret!;
    handlerSecret = oldSecret;
    const mine = () => hook.received.filter((r) => r.path === '/rotating');

    await removeWebhook(h.db.sql, BY_CLI, recipient.username);
    const polled = await post(h, sender, recipient, { content: 'while polling' });
    const [row] = await h.db.sql`select webhook, publish_attempts from deliveries where id = ${polled.deliveryId}`;
    expect(row).toEqual({ webhook: false, publish_attempts: 0 });
    const inbox = await h.call('GET', '/api/deliveries', { key: recipient.key });
    expect(inbox.body.data.map((e: { deliveryId: string }) => e.deliveryId)).toEqual([polled.deliveryId]);

    const { signingSecret: newSecret } = await setWebhook(h.db.sql, BY_CLI, recipient.username, hook.url('/rotating'), { allowLocal: true });
    expect(newSecret).not.toBe(oldSecret);
    const { deliveryId } = await post(h, sender, recipient, { content: 'before the handler learns the new secret' });
    const failed = await untilStep(h, deliveryId, 'failed');
    expect(failed).toMatchObject({ failedStep: 'accepted', sendAttempts: 1 });
    expect(failed.error).toContain('401');
    expect(mine()).toHaveLength(1);

    handlerSecret = newSecret;
    expect((await cli('deliveries', 'resend', deliveryId)).code).toBe(0);
    await untilStep(h, deliveryId, 'notified');
    const last = mine().at(-1)!;
    expect(mine()).toHaveLength(2);
    expect(last.raw).toBe(mine()[0]!.raw);
    expect(last.headers.get('x-signature-256')).toBe(sign(last.raw, newSecret));
  });
});

describe('re-publish sweep', () => {
  test('a delivery that never reached the queue is published again and rung; polling deliveries are left alone', async () => {
    hook.reply(() => new Response('ok'));
    const sender = await h.agent('sweep-sender');
    const recipient = await h.agent('sweep-recipient');
    const poller = await h.agent('sweep-poller');
    const lost = await post(h, sender, recipient, { content: 'lost on the way' });
    const polled = await post(h, sender, poller, { content: 'for the poller' });
    // As if the webhook had been there and the job had never been queued.
    await h.db.sql`update agents set webhook_url = ${hook.url('/sweep')}, signing_secret = 'whsec_test' where username = ${recipient.username}`;
    await h.db.sql`update deliveries set webhook = true, publish_attempts = 1 where id = ${lost.deliveryId}`;
    await h.db.sql`update deliveries set created_at = now() - interval '2 minutes' where id in ${h.db.sql([lost.deliveryId, polled.deliveryId])}`;

    // Younger than a minute: left alone.
    expect(await republishStranded(h.db.sql, { publishAttempts: 3, minAgeMs: 10 * 60_000 })).toEqual({ republished: 0, failed: 0 });
    expect(await republishStranded(h.db.sql, { publishAttempts: 3 })).toEqual({ republished: 1, failed: 0 });
    const d = await untilStep(h, lost.deliveryId, 'notified');
    expect(d.publishAttempts).toBe(2);
    expect(hook.received.filter((r) => r.path === '/sweep')).toHaveLength(1);
    expect(await attemptRows(h, lost.deliveryId)).toMatchObject([{ publish: 2, attempt: 1, status: 200 }]);
    expect((await deliveryRow(h, polled.deliveryId)).step).toBe('accepted');
  });

  test('a live job (queued or running) means nothing is re-published; exhaustion means Failed', async () => {
    const sender = await h.agent('sweep2-sender');
    const recipient = await h.agent('sweep2-recipient', { webhookUrl: hook.url('/sweep2') });
    const { deliveryId } = await post(h, sender, recipient, { content: 'queued for later' });
    await untilStep(h, deliveryId, 'notified');
    await rewind(h, deliveryId, { step: 'accepted', notified_at: null, publish_attempts: 3 });
    await h.db.sql`update deliveries set created_at = now() - interval '2 minutes' where id = ${deliveryId}`;
    await h.db.sql`
      select graphile_worker.add_job('notify', json_build_object('deliveryId', ${deliveryId}::uuid),
                                     run_at => now() + interval '1 hour', job_key => ${`notify:${deliveryId}`})`;
    expect(await republishStranded(h.db.sql, { publishAttempts: 3 })).toEqual({ republished: 0, failed: 0 });

    // A job graphile-worker gave up on is not live.
    await h.db.sql`update graphile_worker._private_jobs set attempts = max_attempts where key = ${`notify:${deliveryId}`}`;
    expect(await republishStranded(h.db.sql, { publishAttempts: 3 })).toEqual({ republished: 0, failed: 1 });
    const d = await deliveryRow(h, deliveryId);
    expect(d).toMatchObject({
      step: 'failed',
      failedStep: 'accepted',
      error: 'The notification never reached the queue after 3 publish attempts.',
    });
  });

  test('the sweep is registered in the crontab, every 15 minutes by default, beside the hourly sweeps and the minutely endpoint health', async () => {
    const known = await eventually(async () => {
      const rows = await h.db.sql<{ identifier: string }[]>`select identifier from graphile_worker._private_known_crontabs order by identifier`;
      return rows.length > 9 ? rows.map((r) => r.identifier) : null;
    });
    expect(known).toEqual([
      'endpoint_health', 'expire_holds', 'hold_notices', 'index_messages', 'prune_history', 'prune_operator_notices', 'republish', 'sweep_files', 'sweep_idempotency_keys', 'sweep_sign_ins',
    ]);
    expect(h.config.REPUBLISH_CRON).toBe('*/15 * * * *');
  });
});
