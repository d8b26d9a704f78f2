import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { silentLogger } from '../src/log';
import { createService, type HttpService } from '../src/service';
import { callApp, type Harness } from './support/harness';
import { eventually, receiver, sleep } from './support/receiver';
import { attemptRows, post, rewind, untilStep, useWorkerHarness, sign } from './support/webhooks';

const { h } = useWorkerHarness();
const hook = receiver();

let agentNo = 0;
const agents = async (reply?: Parameters<typeof hook.reply>[0]) => {
  const n = ++agentNo;
  const sender = await h.agent(`sender-${n}`);
  const recipient = await h.agent(`hooked-${n}`, { webhookUrl: hook.url(`/agent-${n}`) });
  const path = `/agent-${n}`;
  const mine = () => hook.received.filter((r) => r.path === path);
  // `reply` gets the index of the request among this agent's own.
  if (reply) hook.reply((req) => (req.path === path ? reply(req, mine().length - 1) : new Response('ok')));
  return { sender, recipient, mine };
};

const jobGone = (deliveryId: string) =>
  eventually(async () => (await h.db.sql`select 1 from graphile_worker.jobs where key = ${`notify:${deliveryId}`}`).length === 0);

describe('the doorbell', () => {
  // That it is rung at once, on the job's NOTIFY rather than a poll, is shown with one worker slot below.
  test('is the signed six-field payload without the body, and moves the delivery to Notified', async () => {
    const { sender, recipient, mine } = await agents();
    const before = hook.received.length;
    const { deliveryId, messageId, threadId } = await post(h, sender, recipient, {
      content: 'The whole secret body of the message',
      summary: 'Ship on Friday\nsecond line',
    });
    await hook.waitFor(before + 1);
    const [req] = mine();
    const expected = JSON.stringify({
      event: 'message.created',
      data: { deliveryId, messageId, threadId, threadTitle: 'Release plan', sender: sender.username, summary: 'Ship on Friday' },
    });
    expect(req!.raw).toBe(expected);
    expect(req!.raw).not.toContain('secret body');
    expect(req!.headers.get('x-signature-256')).toBe(sign(expected, recipient.signingSecret!));
    expect(req!.headers.get('content-type')).toBe('application/json');
    expect(req!.headers.get('user-agent')).toContain('agent-messaging-service');
    const row = await untilStep(h, deliveryId, 'notified');
    expect(row).toMatchObject({ step: 'notified', failedStep: null, error: null, publishAttempts: 1, sendAttempts: 1 });
    expect(row.notifiedAt).toBeInstanceOf(Date);
    const attempts = await attemptRows(h, deliveryId);
    expect(attempts).toEqual([{ publish: 1, attempt: 1, resend: 0, status: 200, error: null, durationMs: expect.any(Number), interrupted: false }]);
  });

  test("summary is the body's first line when there is none, one line of at most 120 characters", async () => {
    const { sender, recipient, mine } = await agents();
    await post(h, sender, recipient, { content: `\n  ${'word '.repeat(30)}\nnext line` });
    await eventually(async () => mine().length === 1);
    const summary = JSON.parse(mine()[0]!.raw).data.summary as string;
    expect(summary).toHaveLength(120);
    expect(summary.endsWith('…')).toBe(true);
    expect(summary).not.toContain('\n');
  });
});

describe('retries', () => {
  test('a failing handler is retried on the schedule with the same body and X-Signature-256 until it answers 2xx', async () => {
    const { sender, recipient, mine } = await agents((_req, i) => new Response('no', { status: i < 2 ? 500 : 204 }));
    const { deliveryId } = await post(h, sender, recipient, { content: 'retry me' });
    const d = await untilStep(h, deliveryId, 'notified');
    const reqs = mine();
    expect(reqs).toHaveLength(3);
    expect(new Set(reqs.map((r) => r.raw)).size).toBe(1);
    expect(new Set(reqs.map((r) => r.headers.get('x-signature-256'))).size).toBe(1);
    // Not before their delays, 50 ms then 100 ms (the due time is the database's); that they are
    // rung when due rather than at a poll is shown with one worker slot below.
    expect(reqs[1]!.at - reqs[0]!.at).toBeGreaterThanOrEqual(40);
    expect(reqs[2]!.at - reqs[1]!.at).toBeGreaterThanOrEqual(90);
    expect(d).toMatchObject({ step: 'notified', sendAttempts: 3 });
    expect((await attemptRows(h, deliveryId)).map((a) => [a.attempt, a.status])).toEqual([[1, 500], [2, 500], [3, 204]]);
  });

  test('after 1 attempt and 3 retries the delivery is Failed at Accepted with the last error', async () => {
    const { sender, recipient, mine } = await agents(() => new Response('down', { status: 503 }));
    const { deliveryId } = await post(h, sender, recipient, { content: 'nobody home' });
    const d = await untilStep(h, deliveryId, 'failed');
    expect(mine()).toHaveLength(4);
    expect(d.failedStep).toBe('accepted');
    expect(d.error).toBe('Gave up after 4 attempts; the last one: the handler answered HTTP 503.');
    expect((await attemptRows(h, deliveryId)).map((a) => a.status)).toEqual([503, 503, 503, 503]);
    const jobs = await h.db.sql`select 1 from graphile_worker.jobs where key = ${`notify:${deliveryId}`}`;
    expect(jobs).toHaveLength(0);
  });

  test('a handler slower than the time-out is cut off and counts as a failure', async () => {
    const { sender, recipient, mine } = await agents(async () => {
      await sleep(1_000);
      return new Response('late');
    });
    const { deliveryId } = await post(h, sender, recipient, { content: 'slow handler' });
    const d = await untilStep(h, deliveryId, 'failed');
    expect(mine()).toHaveLength(4);
    expect(d.error).toBe('Gave up after 4 attempts; the last one: no answer within 300 ms (timed out).');
    for (const a of await attemptRows(h, deliveryId)) {
      expect(a.status).toBeNull();
      expect(a.durationMs).toBeGreaterThanOrEqual(290);
    }
  });

  test('a connection failure is recorded with its cause', async () => {
    const sender = await h.agent('sender-refused');
    const closed = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: () => new Response() });
    const url = `http://127.0.0.1:${closed.port}/gone`;
    closed.stop(true);
    const recipient = await h.agent('hooked-refused', { webhookUrl: url });
    const { deliveryId } = await post(h, sender, recipient, { content: 'knock knock' });
    const d = await untilStep(h, deliveryId, 'failed');
    expect(d.error).toStartWith('Gave up after 4 attempts; the last one: connection failed');
    expect((await attemptRows(h, deliveryId))).toHaveLength(4);
  });

  test('a handler answering 401 (signature not verified) is Failed at Accepted at once, without retries', async () => {
    const { sender, recipient, mine } = await agents(() => new Response('bad signature', { status: 401 }));
    const { deliveryId } = await post(h, sender, recipient, { content: 'who are you' });
    const d = await untilStep(h, deliveryId, 'failed');
    // With its job gone, nothing is left that could ring again.
    await jobGone(deliveryId);
    expect(mine()).toHaveLength(1);
    expect(d).toMatchObject({
      failedStep: 'accepted',
      error: 'The handler answered HTTP 401: it could not verify the signature; not retried.',
      sendAttempts: 1,
    });
  });

  test('a redirect is not followed and counts as a failure', async () => {
    const target = receiver();
    const { sender, recipient, mine } = await agents(() => new Response(null, { status: 302, headers: { location: target.url() } }));
    const { deliveryId } = await post(h, sender, recipient, { content: 'go elsewhere' });
    const d = await untilStep(h, deliveryId, 'failed');
    expect(mine()).toHaveLength(4);
    expect(target.received).toHaveLength(0);
    expect(d.error).toContain('HTTP 302');
  });
});

describe('deliveries that no longer owe a doorbell', () => {
  test('a job for a delivery already past Accepted, acknowledged, or whose agent has no webhook ends without sending', async () => {
    const { sender, recipient, mine } = await agents();
    const notified = await post(h, sender, recipient, { content: 'one' });
    await untilStep(h, notified.deliveryId, 'notified');
    await rewind(h, notified.deliveryId, { step: 'accepted', acknowledged_at: new Date() });
    const polling = await h.agent('polling-now');
    const removed = await post(h, sender, polling, { content: 'two' });
    await h.db.sql`update deliveries set webhook = true where id = ${removed.deliveryId}`;
    const sentBefore = hook.received.length;
    await h.db.sql`
      select graphile_worker.add_jobs(array[
        row('notify', json_build_object('deliveryId', ${notified.deliveryId}::uuid), null, null, 5, null, null, null)::graphile_worker.job_spec,
        row('notify', json_build_object('deliveryId', ${removed.deliveryId}::uuid), null, null, 5, null, null, null)::graphile_worker.job_spec
      ])`;
    await eventually(async () => (await h.db.sql`select 1 from graphile_worker.jobs where task_identifier = 'notify'`).length === 0);
    expect(hook.received.length).toBe(sentBefore);
    expect(mine()).toHaveLength(1);
    expect(await attemptRows(h, removed.deliveryId)).toHaveLength(0);
  });
});

describe('a handler that never finishes its answer', () => {
  test('counts from its status, keeps what the body held after a second, and closes the connection instead of holding it', async () => {
    const { createServer } = await import('node:http');
    let closed = false;
    const streaming = createServer((req, res) => {
      req.socket.on('close', () => (closed = true));
      // Headers and a first chunk, then nothing: an agent "working" before it ends the answer.
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('working');
    });
    await new Promise<void>((resolve) => streaming.listen(0, '127.0.0.1', resolve));
    try {
      const port = (streaming.address() as { port: number }).port;
      const sender = await h.agent('stream-sender');
      const recipient = await h.agent('stream-recipient', { webhookUrl: `http://127.0.0.1:${port}/hook` });
      const { deliveryId } = await post(h, sender, recipient, { content: 'hi' });
      await untilStep(h, deliveryId, 'notified');
      await eventually(async () => closed);
      expect(closed).toBe(true);
      const [attempt] = await h.db.sql`select status, response_body from delivery_attempts where delivery_id = ${deliveryId}`;
      expect(attempt).toEqual({ status: 200, response_body: 'working' });
    } finally {
      streaming.close();
      streaming.closeAllConnections();
    }
  });
});

// Attempts that finish together are recorded by one statement (notify-task.ts); each keeps its own
// outcome: Notified, a retry on the schedule, or Failed at once.
describe('many doorbells at once', () => {
  test('each attempt is recorded with its own outcome when they finish together', async () => {
    const sender = await h.agent('burst-sender');
    const outcomes = ['ok', 'ok', 'flaky', 'refuses', 'ok', 'flaky', 'refuses', 'ok'];
    const seen = new Map<string, number>();
    hook.reply((req) => {
      const kind = req.path.split('/')[2];
      const n = (seen.get(req.path) ?? 0) + 1;
      seen.set(req.path, n);
      if (kind === 'refuses') return new Response('no', { status: 401 });
      if (kind === 'flaky' && n === 1) return new Response('busy', { status: 503 });
      return new Response('ok');
    });
    const recipients = await Promise.all(
      outcomes.map((kind, i) => h.agent(`burst-${i}`, { webhookUrl: hook.url(`/burst/${kind}/${i}`) })),
    );
    const thread = await h.call('POST', '/api/threads', {
      key: sender.key,
      body: { title: 'Burst', participantUsernames: recipients.map((r) => r.username) },
    });
    const posted = await h.call('POST', `/api/threads/${thread.body.data.id}/messages`, { key: sender.key, body: { content: 'all at once' } });
    expect(posted.body.data.recipients).toBe(outcomes.length);
    const deliveries = await h.db.sql<{ id: string; username: string }[]>`
      select d.id, a.username from deliveries d join agents a on a.id = d.recipient_id where d.message_id = ${posted.body.data.id}`;
    const byName = new Map(deliveries.map((d) => [d.username, d.id]));
    for (const [i, kind] of outcomes.entries()) {
      const id = byName.get(`burst-${i}`)!;
      const row = await untilStep(h, id, kind === 'refuses' ? 'failed' : 'notified');
      const attempts = (await attemptRows(h, id)).map((a) => [a.attempt, a.status]);
      if (kind === 'ok') expect(attempts).toEqual([[1, 200]]);
      if (kind === 'flaky') expect(attempts).toEqual([[1, 503], [2, 200]]);
      if (kind === 'refuses') {
        expect(attempts).toEqual([[1, 401]]);
        expect(row).toMatchObject({ failedStep: 'accepted', sendAttempts: 1 });
      }
    }
    hook.reply(() => new Response('ok'));
  });
});

// With one worker slot, graphile-worker's own next look after a fetch that found nothing is its
// poll, 2 s later. A doorbell that arrives well within that was brought by a wake-up: the NOTIFY of
// its new job, or the timer the worker sets for a retry when it falls due.
describe('woken, not found by the 2 s poll', () => {
  const { h: one } = useWorkerHarness({ WEBHOOK_CONCURRENCY: '1', WEBHOOK_RETRY_DELAYS_MS: '300,300,300' });
  // Posts through a process of their own that runs no worker (WORKER=off beside an `ams worker`):
  // their doorbells are the queue's at once, announced by the NOTIFY of their jobs. (A process that
  // runs a worker rings its own posts' doorbells itself; see 'rung at once' below.)
  let front: HttpService;
  const frontDoor = (): Harness => ({
    ...one,
    call: (method, path, opts = {}) =>
      callApp(front.app, method, path, { headers: { ...opts.headers, authorization: `Bearer ${opts.key}` }, body: opts.body, raw: opts.raw }),
  });
  beforeAll(async () => {
    front = await createService(one.config, { log: silentLogger, http: true, worker: false });
  });
  afterAll(() => front?.stop());
  const RETRY_MS = 300;
  // Well short of the poll's 2 s, with a second of slack for a busy machine.
  const WOKEN_WITHIN_MS = 1_500;
  // When the slot has finished its next job and the pool's fetch (the pool fetches for its workers,
  // webhooks/worker.ts) has come back empty, whichever is later: the poll timer runs from then.
  const idleAfterNextJob = () =>
    new Promise<number>((resolve) => {
      const events = one.service.worker!.runner.events;
      events.once('job:start', () => {
        let completed = false;
        let foundNothing = false;
        const settle = () => {
          if (!completed || !foundNothing) return;
          events.off('localQueue:getJobs:complete', onFetch);
          resolve(performance.now());
        };
        const onFetch = ({ jobs }: { jobs: unknown[] }) => {
          if (jobs.length > 0) return;
          foundNothing = true;
          settle();
        };
        events.on('localQueue:getJobs:complete', onFetch);
        events.once('job:complete', () => {
          completed = true;
          settle();
        });
      });
    });

  test('a new doorbell is rung on its NOTIFY while the slot is idle', async () => {
    const sender = await one.agent('woken-sender');
    const recipient = await one.agent('woken-notify', { webhookUrl: hook.url('/woken-notify') });
    const mine = () => hook.received.filter((r) => r.path === '/woken-notify');
    const idle = idleAfterNextJob();
    await post(frontDoor(), sender, recipient, { content: 'settle the slot' });
    const idleAt = await idle;
    await post(frontDoor(), sender, recipient, { content: 'ring now' });
    await eventually(async () => mine().length === 2);
    expect(mine()[1]!.at - idleAt).toBeLessThan(WOKEN_WITHIN_MS);
  });

  test('a retry is rung when it falls due', async () => {
    const sender = await one.agent('woken-retry-sender');
    const recipient = await one.agent('woken-retry', { webhookUrl: hook.url('/woken-retry') });
    const mine = () => hook.received.filter((r) => r.path === '/woken-retry');
    hook.reply((req) => (req.path === '/woken-retry' && mine().length < 3 ? new Response('busy', { status: 503 }) : new Response('ok')));
    const { deliveryId } = await post(one, sender, recipient, { content: 'retry on time' });
    await untilStep(one, deliveryId, 'notified');
    hook.reply(() => new Response('ok'));
    const reqs = mine();
    expect(reqs).toHaveLength(3);
    for (const gap of [reqs[1]!.at - reqs[0]!.at, reqs[2]!.at - reqs[1]!.at]) {
      // Not before it is due (by the database's clock), and long before the poll would find it.
      expect(gap).toBeGreaterThanOrEqual(RETRY_MS - 10);
      expect(gap).toBeLessThan(WOKEN_WITHIN_MS);
    }
  });
});
