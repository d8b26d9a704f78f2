import { afterAll, describe, expect, test } from 'bun:test';
import { ringAfterCommit, ringHere, RING_AT_ONCE_WINDOW_MS } from '../src/domain/deliveries/doorbells-at-once';
import { createLogger } from '../src/log';
import { createService, type HttpService } from '../src/service';
import { callApp, type Harness } from './support/harness';
import { eventually, receiver } from './support/receiver';
import { attemptRows, post, untilStep, useWorkerHarness } from './support/webhooks';

type Line = { event: string; deliveryId?: string; pickedUp?: string; [field: string]: unknown };

// A handler that keeps the requests to paths in `held` waiting until the test lets them go.
const hook = receiver();
const held = new Map<string, Promise<void>>();
const letGo = new Map<string, () => void>();
const hold = (path: string) => held.set(path, new Promise((resolve) => letGo.set(path, resolve)));
hook.reply(async (req) => {
  await held.get(req.path);
  return new Response('ok');
});
const requestsTo = (path: string) => hook.received.filter((r) => r.path === path);

const recording = () => {
  const lines: Line[] = [];
  const log = createLogger('info', (line) => lines.push(JSON.parse(line)));
  const attempts = (deliveryId: string) => lines.filter((l) => l.event === 'doorbell_attempt' && l.deliveryId === deliveryId);
  return { log, attempts };
};

// The job under a delivery's key, while it is still queued or running.
async function jobOf(h: Harness, deliveryId: string) {
  const [job] = await h.db.sql<{ lockedBy: string | null; attempts: number; windowMs: number; lastError: string | null }[]>`
    select locked_by as "lockedBy", attempts, (extract(epoch from run_at - created_at) * 1000)::int as "windowMs",
           last_error as "lastError"
    from graphile_worker.jobs where key = ${`notify:${deliveryId}`}`;
  return job ?? null;
}

describe('a post in a process that runs a worker', () => {
  const { log, attempts } = recording();
  // Held requests wait longer than the usual test time-out.
  const { h } = useWorkerHarness({ WEBHOOK_TIMEOUT_MS: '30000' }, { log });

  test('has its doorbell rung by that process straight after the commit, and its job claimed while the ring is slow', async () => {
    const sender = await h.agent('at-once-sender');
    const recipient = await h.agent('at-once', { webhookUrl: hook.url('/at-once') });
    hold('/at-once');
    const { deliveryId } = await post(h, sender, recipient, { content: 'ring me now' });
    await eventually(async () => requestsTo('/at-once').length === 1);
    // Still on the wire after CLAIM_AFTER_MS, the job is taken as a worker takes one (locked by
    // this pool, one attempt counted) before its window ends and the queue's workers could.
    const claimed = await eventually(async () => {
      const job = await jobOf(h, deliveryId);
      return job?.lockedBy ? job : null;
    });
    expect(claimed).toEqual({ lockedBy: h.service.worker!.workerId, attempts: 1, windowMs: RING_AT_ONCE_WINDOW_MS, lastError: null });
    letGo.get('/at-once')!();
    await untilStep(h, deliveryId, 'notified');
    // The statement that recorded the attempt retired the job.
    await eventually(async () => (await jobOf(h, deliveryId)) === null);
    expect((await attemptRows(h, deliveryId)).map((a) => [a.publish, a.attempt, a.status, a.interrupted])).toEqual([[1, 1, 200, false]]);
    expect(attempts(deliveryId).map((l) => [l.pickedUp, l.status, l.next])).toEqual([['at once', 200, 'notified']]);
    expect(requestsTo('/at-once')).toHaveLength(1);
  });

  test('a doorbell answered at once is recorded as the first attempt of the first publish, its job retired by the record', async () => {
    const sender = await h.agent('quick-sender');
    const recipient = await h.agent('quick', { webhookUrl: hook.url('/quick') });
    const { deliveryId } = await post(h, sender, recipient, { content: 'answer me quickly' });
    await untilStep(h, deliveryId, 'notified');
    await eventually(async () => (await jobOf(h, deliveryId)) === null);
    expect((await attemptRows(h, deliveryId)).map((a) => [a.publish, a.attempt, a.resend, a.status])).toEqual([[1, 1, 0, 200]]);
    expect(attempts(deliveryId).map((l) => [l.pickedUp, l.status])).toEqual([['at once', 200]]);
  });

  test('a doorbell cut on the wire by a stop goes back to the queue, and its next run records the cut-off attempt first', async () => {
    // A second process on the same database, stopped while its doorbell is on the wire.
    const other: HttpService = await createService(h.config, { log: createLogger('error', () => {}), http: true, worker: true });
    const sender = await h.agent('cut-at-once-sender');
    const recipient = await h.agent('cut-at-once', { webhookUrl: hook.url('/cut-at-once') });
    hold('/cut-at-once');
    const viaOther: Harness = {
      ...h,
      call: (method, path, opts = {}) => callApp(other.app, method, path, { headers: { authorization: `Bearer ${opts.key}` }, body: opts.body }),
    };
    const { deliveryId } = await post(viaOther, sender, recipient, { content: 'cut me off' });
    await eventually(async () => requestsTo('/cut-at-once').length === 1);
    await eventually(async () => (await jobOf(h, deliveryId))?.lockedBy === other.worker!.workerId);
    await other.stop();
    // Given back as graphile-worker fails a job: unlocked, the error kept, the attempt counted.
    expect(await jobOf(h, deliveryId)).toMatchObject({
      lockedBy: null, attempts: 1, lastError: 'Worker shut down while the doorbell was in flight.',
    });
    letGo.get('/cut-at-once')!();
    await untilStep(h, deliveryId, 'notified', 15_000);
    const rows = await attemptRows(h, deliveryId);
    expect(rows.map((a) => [a.attempt, a.status, a.interrupted])).toEqual([[1, null, true], [2, 200, false]]);
    expect(attempts(deliveryId).map((l) => l.pickedUp)).toEqual(['queue']);
    expect(requestsTo('/cut-at-once')).toHaveLength(2);
  }, 30_000);

  // The last two in this block take this process's ringer away.
  test('a doorbell whose ringer went away before its post committed is handed to the queue at once, as never rung', async () => {
    const gone = ringHere(h.db.sql, (jobs) => {
      gone();
      ringAfterCommit(h.db.sql, log, jobs);
    });
    const sender = await h.agent('ringer-gone-sender');
    const recipient = await h.agent('ringer-gone', { webhookUrl: hook.url('/ringer-gone') });
    const { deliveryId } = await post(h, sender, recipient, { content: 'nobody rings me here' });
    await untilStep(h, deliveryId, 'notified');
    expect((await attemptRows(h, deliveryId)).map((a) => [a.attempt, a.status, a.interrupted])).toEqual([[1, 200, false]]);
    expect(attempts(deliveryId).map((l) => l.pickedUp)).toEqual(['queue']);
    expect(requestsTo('/ringer-gone')).toHaveLength(1);
  });

  test('a doorbell its process never claimed (it died while ringing) is rung by the queue once the window ends, the ring it may have made recorded as cut off', async () => {
    ringHere(h.db.sql, () => {});
    const sender = await h.agent('unclaimed-sender');
    const recipient = await h.agent('unclaimed', { webhookUrl: hook.url('/unclaimed') });
    const { deliveryId } = await post(h, sender, recipient, { content: 'nobody claims me' });
    expect(await jobOf(h, deliveryId)).toEqual({ lockedBy: null, attempts: 0, windowMs: RING_AT_ONCE_WINDOW_MS, lastError: null });
    await untilStep(h, deliveryId, 'notified', 10_000);
    expect((await attemptRows(h, deliveryId)).map((a) => [a.attempt, a.status, a.interrupted])).toEqual([[1, null, true], [2, 200, false]]);
    expect(attempts(deliveryId).map((l) => l.pickedUp)).toEqual(['queue']);
    expect(requestsTo('/unclaimed')).toHaveLength(1);
  });
});

describe('doorbells rung at once beyond the cap', () => {
  const { log, attempts } = recording();
  const { h } = useWorkerHarness({ WEBHOOK_CONCURRENCY: '1', WEBHOOK_TIMEOUT_MS: '30000' }, { log });

  test('are handed to the queue at once as first attempts, not left to wait out the window', async () => {
    const sender = await h.agent('capped-sender');
    const recipients = await Promise.all([1, 2, 3].map((n) => h.agent(`capped-${n}`, { webhookUrl: hook.url(`/capped-${n}`) })));
    for (const n of [1, 2, 3]) hold(`/capped-${n}`);
    const thread = await h.thread(sender, recipients);
    const { id: messageId } = await h.post(sender, thread, 'three doorbells, room for one');
    // The claim follows the commit, and so the post's answer.
    const deliveries = await eventually(async () => {
      const rows = await h.db.sql<{ id: string; windowMs: number }[]>`
        select d.id, (extract(epoch from j.run_at - j.created_at) * 1000)::int as "windowMs"
        from deliveries d join graphile_worker.jobs j on j.key = 'notify:' || d.id
        where d.message_id = ${messageId} order by "windowMs" desc`;
      return rows.filter((r) => r.windowMs < RING_AT_ONCE_WINDOW_MS).length > 0 ? [...rows] : null;
    });
    // One rung at once, its job waiting out its window; the two over the cap made due at once.
    expect(deliveries).toHaveLength(3);
    expect(deliveries[0]!.windowMs).toBe(RING_AT_ONCE_WINDOW_MS);
    expect(deliveries.slice(1).every((d) => d.windowMs < RING_AT_ONCE_WINDOW_MS)).toBe(true);
    for (const n of [1, 2, 3]) letGo.get(`/capped-${n}`)!();
    for (const d of deliveries) await untilStep(h, d.id, 'notified');
    const pickedUp = deliveries.map((d) => attempts(d.id).map((l) => [l.pickedUp, l.attempt]));
    expect(pickedUp).toEqual([[['at once', 1]], [['queue', 1]], [['queue', 1]]]);
    for (const n of [1, 2, 3]) expect(requestsTo(`/capped-${n}`)).toHaveLength(1);
  });
});

afterAll(() => {
  for (const go of letGo.values()) go();
});
