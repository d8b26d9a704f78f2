import { afterAll, describe, expect, test } from 'bun:test';
import { freePort } from '../test/support/ports';
import { eventually, receiver } from '../test/support/receiver';
import { useWorkerHarness } from '../test/support/webhooks';

// One endpoint that hangs, crawls or refuses must not delay anyone else's doorbell: it holds at
// most WEBHOOK_ENDPOINT_CONCURRENCY (4) of the 32 worker slots, and its other doorbells wait
// parked, holding none. Before the cap, 100 hanging doorbells delayed a healthy agent's by seconds.
const TIMEOUT_MS = 5_000;
// The floods come from one agent, past the default quota: counted, never refused.
const { h } = useWorkerHarness({ WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS), WEBHOOK_RETRY_DELAYS_MS: '50,100,150', SEND_MESSAGES_PER_MINUTE: '100000000' });

const arrivals = new Map<string, number>();
const held: (() => void)[] = [];
const hook = receiver(async (req) => {
  if (req.path === '/healthy') {
    arrivals.set(JSON.parse(req.raw).data.messageId, performance.now());
    return new Response('ok');
  }
  if (req.path.startsWith('/hang')) {
    // Never answers: the sender's time-out cuts it off.
    await new Promise<void>((resolve) => held.push(resolve));
    return new Response('too late');
  }
  if (req.path === '/slow') {
    await Bun.sleep(TIMEOUT_MS - 1_000);
    return new Response('ok, eventually');
  }
  return new Response('unexpected', { status: 418 });
});
afterAll(() => held.forEach((release) => release()));

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

let sender: { key: string; username: string };
let healthyThread: string;

// The healthy agent's doorbell latency (post sent → doorbell received), for posts sent at 5 a
// second whether or not the earlier ones have rung, as agents post.
async function healthyLatencies(count = 15): Promise<number[]> {
  const sent = await Promise.all(
    Array.from({ length: count }, async (_, i) => {
      await Bun.sleep(i * 200);
      const started = performance.now();
      const { id } = await h.post(sender as never, healthyThread, `healthy ${i}`);
      return { id, started };
    }),
  );
  return Promise.all(sent.map(async ({ id, started }) => (await eventually(async () => arrivals.get(id), 60_000)) - started));
}

// Posts `count` messages to a fresh agent whose webhook is `url`, 50 at a time.
async function flood(name: string, url: string, count: number) {
  const agent = await h.agent(name, { webhookUrl: url });
  const thread = await h.thread(sender as never, [agent]);
  for (let i = 0; i < count; i += 50) {
    await Promise.all(Array.from({ length: Math.min(50, count - i) }, (_, j) => h.post(sender as never, thread, `flood ${i + j}`)));
  }
}

// Twice the latency alone, plus 10 ms for the scheduling noise of a shared two-core machine, which
// at a few milliseconds' baseline would otherwise decide the outcome.
const within = (loaded: number, alone: number) => loaded <= 2 * alone + 10;

describe('a bad endpoint never delays another agent', () => {
  let alone = 0;

  test('baseline: the healthy agent alone', async () => {
    sender = await h.agent('hol-sender');
    const healthy = await h.agent('hol-healthy', { webhookUrl: hook.url('/healthy') });
    healthyThread = await h.thread(sender as never, [healthy]);
    await healthyLatencies(5);
    alone = median(await healthyLatencies());
    console.log(`head-of-line: healthy doorbell p50 alone ${alone.toFixed(1)} ms`);
  }, 60_000);

  for (const [name, path, count] of [
    ['100 hanging deliveries', '/hang-100', 100],
    ['1 000 hanging deliveries', '/hang-1000', 1_000],
    ['100 deliveries to a handler that answers after 4 s', '/slow', 100],
  ] as const) {
    test(`with ${name} for another agent, the healthy doorbell p50 stays within twice its latency alone`, async () => {
      await flood(`hol-${path.slice(1)}`, hook.url(path), count);
      const loaded = median(await healthyLatencies());
      console.log(`head-of-line: healthy doorbell p50 beside ${name}: ${loaded.toFixed(1)} ms (alone ${alone.toFixed(1)} ms)`);
      expect(within(loaded, alone)).toBe(true);
      // The bad endpoint holds no more than its cap of slots; the rest of its doorbells are parked.
      const [parked] = await h.db.sql<{ n: number }[]>`
        select count(*)::int as n from graphile_worker.jobs
        where task_identifier = 'notify' and locked_at is null and run_at > now() + interval '10 seconds'`;
      expect(parked!.n).toBeGreaterThan(0);
    }, 120_000);
  }

  test('with 100 deliveries to an endpoint that refuses connections, the healthy doorbell p50 stays within twice its latency alone', async () => {
    await flood('hol-refused', `http://127.0.0.1:${await freePort()}/hook`, 100);
    const loaded = median(await healthyLatencies());
    console.log(`head-of-line: healthy doorbell p50 beside a refusing endpoint: ${loaded.toFixed(1)} ms (alone ${alone.toFixed(1)} ms)`);
    expect(within(loaded, alone)).toBe(true);
  }, 120_000);
});
