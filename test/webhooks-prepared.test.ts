import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { setWebhook } from '../src/domain/agents/agents';
import { createLogger, silentLogger } from '../src/log';
import { createService } from '../src/service';
import { startWorker, type RunningWorker } from '../src/webhooks/worker';
import { callApp, useHarness, type Harness } from './support/harness';
import { receiver } from './support/receiver';
import { FAST_WEBHOOKS, post, sign, untilStep } from './support/webhooks';
import { BY_CLI } from '../src/domain/people/audit';

// A post puts the doorbell, as it stands, into its job; a worker that already holds the webhook's
// secret rings without loading the delivery first. Whichever way it goes, the bytes are the same.
const lines: Record<string, unknown>[] = [];
let worker: RunningWorker;
// Registered before the harness's own teardown, so that the worker stops before its database goes.
afterAll(async () => {
  await worker?.stop();
});
const h = useHarness(FAST_WEBHOOKS);
const hook = receiver();
beforeAll(async () => {
  const log = createLogger('info', (line) => lines.push(JSON.parse(line)));
  worker = await startWorker({ sql: h.db.sql, databaseUrl: h.db.url, config: h.config, log });
});

const attemptsLogged = (deliveryId: string) => lines.filter((l) => l.event === 'doorbell_attempt' && l.deliveryId === deliveryId);

describe('a prepared doorbell', () => {
  test('rings without loading the delivery once the secret is known, with the bytes and signature a loaded one has', async () => {
    const sender = await h.agent('prep-sender');
    const recipient = await h.agent('prep-hooked', { webhookUrl: hook.url('/prep') });
    // The first doorbell to this agent is loaded, which teaches the worker its secret.
    const first = await post(h, sender, recipient, { content: 'first' });
    await untilStep(h, first.deliveryId, 'notified');
    expect(attemptsLogged(first.deliveryId)).toMatchObject([{ attempt: 1, prepared: false, status: 200 }]);

    // The next one rings as prepared; the handler fails it once, so the retry is loaded again.
    let failures = 0;
    hook.reply((req) => (req.path === '/prep' && failures++ === 0 ? new Response('no', { status: 500 }) : new Response('ok')));
    // A summary cut where an emoji sits: it must stay whole on both ways, not become half a pair.
    const second = await post(h, sender, recipient, { content: `\n\n  Deploy   the ${'b'.repeat(105)}d 😀😀😀\nthen rest` });
    await untilStep(h, second.deliveryId, 'notified');
    expect(attemptsLogged(second.deliveryId)).toMatchObject([
      { attempt: 1, prepared: true, status: 500, next: 'retry' },
      { attempt: 2, prepared: false, status: 200, next: 'notified' },
    ]);
    const rung = hook.received.filter((r) => r.raw.includes(second.messageId));
    expect(rung).toHaveLength(2);
    const expected = JSON.stringify({
      event: 'message.created',
      data: {
        deliveryId: second.deliveryId,
        messageId: second.messageId,
        threadId: second.threadId,
        threadTitle: 'Release plan',
        sender: sender.username,
        summary: `Deploy the ${'b'.repeat(105)}d 😀…`,
      },
    });
    expect(rung.map((r) => r.raw)).toEqual([expected, expected]);
    expect(rung.map((r) => r.headers.get('x-signature-256'))).toEqual([sign(expected, recipient.signingSecret!), sign(expected, recipient.signingSecret!)]);
    hook.reply(() => new Response('ok'));
  });

  test("is looked up and recorded over the worker's two connections that keep their plans", async () => {
    const sender = await h.agent('kept-plans-sender');
    const recipient = await h.agent('kept-plans', { webhookUrl: hook.url('/kept-plans') });
    const first = await post(h, sender, recipient, { content: 'teach the worker the secret' });
    await untilStep(h, first.deliveryId, 'notified');
    // Posted by a process that runs no worker, the next doorbell is the queue's, and a doorbell the
    // queue hands over is asked whether it is still owed (a post's own process rings it at once,
    // owed as of its commit).
    const front = await createService(h.config, { log: silentLogger, http: true, worker: false });
    const viaFront: Harness = {
      ...h,
      call: (method, path, opts = {}) => callApp(front.app, method, path, { headers: { authorization: `Bearer ${opts.key}` }, body: opts.body }),
    };
    const second = await post(viaFront, sender, recipient, { content: 'from the queue' }).finally(() => front.stop());
    await untilStep(h, second.deliveryId, 'notified');
    expect(attemptsLogged(second.deliveryId)).toMatchObject([{ attempt: 1, prepared: true, pickedUp: 'queue', status: 200 }]);
    // Each connection's last statement is the one it is kept for.
    const rows = await h.db.sql<{ name: string; query: string }[]>`
      select application_name as name, query from pg_stat_activity
      where datname = current_database() and application_name like 'agent-messaging-service: doorbell%'
      order by application_name`;
    expect(rows.map((r) => r.name)).toEqual(['agent-messaging-service: doorbell attempt record', 'agent-messaging-service: doorbell owed look-up']);
    expect(rows[0]!.query).toContain('insert into delivery_attempts');
    expect(rows[1]!.query).toContain('with d as materialized (select * from deliveries where id = any');
  });

  test('a webhook saved again is another version: the next doorbell is loaded, signed with the new secret', async () => {
    const sender = await h.agent('prep-sender-2');
    const recipient = await h.agent('prep-hooked-2', { webhookUrl: hook.url('/prep-2') });
    const warm = await post(h, sender, recipient, { content: 'warm' });
    await untilStep(h, warm.deliveryId, 'notified');
    const saved = await setWebhook(h.db.sql, BY_CLI, recipient.username, hook.url('/prep-2'), { allowLocal: true });
    expect(saved.signingSecret).not.toBe(recipient.signingSecret);
    const after = await post(h, sender, recipient, { content: 'after' });
    await untilStep(h, after.deliveryId, 'notified');
    expect(attemptsLogged(after.deliveryId)).toMatchObject([{ attempt: 1, prepared: false, status: 200 }]);
    const [req] = hook.received.filter((r) => r.raw.includes(after.messageId));
    expect(req!.headers.get('x-signature-256')).toBe(sign(req!.raw, saved.signingSecret));
  });
});
