import { beforeAll, describe, expect, test } from 'bun:test';
import { Glob } from 'bun';
import { DELIVERY_CHANNEL, INBOX_CHANNEL } from '../src/db/inbox-signal';
import { asActor, type Agent } from '../src/domain/agents/actors';
import { acknowledge, reportDelivered } from '../src/domain/deliveries/inbox';
import { deliveryFilter } from '../src/domain/deliveries/delivery-query';
import {
  forgetNextAttempt,
  owedDoorbell,
  recordAttempt,
  recordInterruptedAttempt,
  republishStranded,
  resendDelivery,
  resendFailed,
} from '../src/domain/deliveries/delivery-steps';
import { listMessages, postMessage, readMessage } from '../src/domain/messages/messages';
import { afterAttempt, type AttemptOutcome } from '../src/domain/deliveries/retry-policy';
import { silentLogger } from '../src/log';
import { uniqueName, useHarness, type TestAgent } from './support/harness';
import { post } from './support/webhooks';
import { BY_CLI } from '../src/domain/people/audit';

// The wake-up contract (src/domain/deliveries/delivery-wake-ups.ts): every write path of the domain that
// changes what a watcher sees wakes the delivery's watchers exactly once, and a new delivery's
// recipient exactly once; a write that changes nothing wakes nobody. Heard on a connection of its
// own, as the inbox listener and the dashboards hear it.

const h = useHarness();
const policy = { delaysMs: [50, 100, 150] };
// Notifications reach a listener in commit order, so everything heard between two marks of our
// own was sent between them. (One listener for the whole file: postgres.js sends UNLISTEN on a
// pooled connection, not the listening one, so a listener made afresh per test could still hear
// what an earlier test's write sent.)
const MARK_CHANNEL = 'ams_test_wake_ups_mark';
// How long a wake-up sent after the write's own commit (way 2) is given to follow it.
const AFTER_COMMIT_MS = 5_000;

type Heard = { inbox: string[]; delivery: string[] };
type Event = { channel: 'inbox' | 'delivery' | 'mark'; payload: string };
const events: Event[] = [];
let marks = 0;

beforeAll(async () => {
  await h.db.sql.listen(INBOX_CHANNEL, (payload) => events.push({ channel: 'inbox', payload }));
  await h.db.sql.listen(DELIVERY_CHANNEL, (payload) => events.push({ channel: 'delivery', payload }));
  await h.db.sql.listen(MARK_CHANNEL, (payload) => events.push({ channel: 'mark', payload }));
});

// Where in the events a new mark was heard.
async function mark(): Promise<number> {
  const token = String(++marks);
  await h.db.sql`select pg_notify(${MARK_CHANNEL}, ${token})`;
  for (;;) {
    const at = events.findIndex((e) => e.channel === 'mark' && e.payload === token);
    if (at >= 0) return at;
    await Bun.sleep(5);
  }
}

async function wakesOf(write: () => Promise<unknown>, expected: number): Promise<Heard> {
  const from = await mark();
  const wakes = () => events.slice(from + 1).filter((e) => e.channel !== 'mark');
  await write();
  const deadline = performance.now() + AFTER_COMMIT_MS;
  while (wakes().length < expected && performance.now() < deadline) await Bun.sleep(10);
  // A second wake-up of the same change would be sent within moments of the first.
  await Bun.sleep(100);
  const heard = events.slice(from + 1, await mark());
  const of = (channel: Event['channel']) => heard.filter((e) => e.channel === channel).map((e) => e.payload).toSorted();
  return { inbox: of('inbox'), delivery: of('delivery') };
}

const expectWakes = async (write: () => Promise<unknown>, wakes: Heard) =>
  expect(await wakesOf(write, wakes.inbox.length + wakes.delivery.length)).toEqual({
    inbox: wakes.inbox.toSorted(),
    delivery: wakes.delivery.toSorted(),
  });

async function agentOf(agent: TestAgent): Promise<Agent> {
  const [row] = await h.db.sql<{ id: string }[]>`select id from agents where username = ${agent.username}`;
  return { id: row!.id, username: agent.username };
}

const hook = 'http://127.0.0.1:9/hook';

// A delivery to a recipient with a webhook, and its recipient; no worker runs here, so its job
// waits in the queue.
async function webhookDelivery(content = 'ring') {
  const sender = await h.agent(uniqueName('wake-sender'));
  const recipient = await h.agent(uniqueName('wake-hooked'), { webhookUrl: hook });
  const posted = await post(h, sender, recipient, { content });
  return { ...posted, sender, recipient };
}

async function attempt(deliveryId: string, outcome: AttemptOutcome) {
  const owed = (await owedDoorbell(h.db.sql, deliveryId))!;
  const { publish, attempt, resend } = owed;
  const next = afterAttempt(outcome, attempt, policy);
  const endpoint = { agentId: owed.recipientId, webhookVersion: owed.webhookVersion, url: owed.url };
  return recordAttempt(h.db.sql, { deliveryId, endpoint, publish, attempt, resend, attemptedAt: new Date(), durationMs: 3, outcome, next });
}

// An attempt made as a test's setup, its wake-up heard before the test listens for its own: one
// sent after the commit could otherwise arrive in the next write's count.
const attemptHeard = (deliveryId: string, outcome: AttemptOutcome) =>
  expectWakes(() => attempt(deliveryId, outcome), { inbox: [], delivery: [deliveryId] });

async function failedDelivery() {
  const made = await webhookDelivery('fail me');
  await attemptHeard(made.deliveryId, { status: 401, error: null });
  return made;
}

describe('re-publishing a doorbell lost from the queue', () => {
  // First in the file: the sweep looks at every delivery, and later tests leave some owed.
  test('queues it again and wakes nobody: nothing a watcher sees changed', async () => {
    const { deliveryId } = await webhookDelivery();
    await h.db.sql`delete from graphile_worker._private_jobs where key = ${`notify:${deliveryId}`}`;
    await expectWakes(() => republishStranded(h.db.sql, { publishAttempts: 3, minAgeMs: 0 }), { inbox: [], delivery: [] });
    const [row] = await h.db.sql`select step, publish_attempts from deliveries where id = ${deliveryId}`;
    expect([row!.step, row!.publish_attempts]).toEqual(['accepted', 2]);
  });

  test('fails it after its last publish, waking its watchers once', async () => {
    const { deliveryId } = await webhookDelivery();
    await h.db.sql`delete from graphile_worker._private_jobs where key = ${`notify:${deliveryId}`}`;
    await h.db.sql`update deliveries set publish_attempts = 3 where id = ${deliveryId}`;
    await expectWakes(() => republishStranded(h.db.sql, { publishAttempts: 3, minAgeMs: 0 }), { inbox: [], delivery: [deliveryId] });
  });
});

describe('a post', () => {
  test('to a recipient without a webhook wakes its inbox and its watchers once, after the commit', async () => {
    const sender = await h.agent(uniqueName('wake-poster'));
    const recipient = await h.agent(uniqueName('wake-poller'));
    const threadId = await h.thread(sender, [recipient]);
    const { id: recipientId } = await agentOf(recipient);
    let messageId = '';
    const wakes = await wakesOf(async () => {
      messageId = (await postMessage(h.db.sql, silentLogger, asActor(await agentOf(sender)), threadId, { content: 'poll me' })).id;
    }, 2);
    const [delivery] = await h.db.sql<{ id: string }[]>`select id from deliveries where message_id = ${messageId}`;
    expect(wakes).toEqual({ inbox: [recipientId], delivery: [delivery!.id] });
  });

  test('to recipients with and without webhooks wakes each inbox and each delivery once, inside its statement', async () => {
    const sender = await h.agent(uniqueName('wake-poster'));
    const hooked = await h.agent(uniqueName('wake-hooked'), { webhookUrl: hook });
    const poller = await h.agent(uniqueName('wake-poller'));
    const threadId = await h.thread(sender, [hooked, poller]);
    let messageId = '';
    const wakes = await wakesOf(async () => {
      messageId = (await postMessage(h.db.sql, silentLogger, asActor(await agentOf(sender)), threadId, { content: 'both' })).id;
    }, 4);
    const rows = await h.db.sql<{ id: string; recipient_id: string }[]>`select id, recipient_id from deliveries where message_id = ${messageId}`;
    expect(wakes).toEqual({ inbox: rows.map((r) => r.recipient_id).toSorted(), delivery: rows.map((r) => r.id).toSorted() });
  });

  test('with an idempotency key wakes once, and its replay wakes nobody', async () => {
    const sender = await h.agent(uniqueName('wake-poster'));
    const recipient = await h.agent(uniqueName('wake-poller'));
    const threadId = await h.thread(sender, [recipient]);
    const actor = asActor(await agentOf(sender));
    const idempotency = { key: 'wake-once', retentionMs: 60_000 };
    let messageId = '';
    const first = await wakesOf(async () => {
      messageId = (await postMessage(h.db.sql, silentLogger, actor, threadId, { content: 'once' }, idempotency)).id;
    }, 2);
    const [delivery] = await h.db.sql<{ id: string }[]>`select id from deliveries where message_id = ${messageId}`;
    expect(first).toEqual({ inbox: [(await agentOf(recipient)).id], delivery: [delivery!.id] });
    await expectWakes(() => postMessage(h.db.sql, silentLogger, actor, threadId, { content: 'once' }, idempotency), { inbox: [], delivery: [] });
  });
});

describe("a doorbell attempt's record", () => {
  test.each([
    ['answered 2xx (Notified)', { status: 204, error: null }, 'notified'],
    ['to be retried', { status: 500, error: null }, 'accepted'],
    ['failed at once (401)', { status: 401, error: null }, 'failed'],
  ] as const)('%s wakes its watchers once, after the commit', async (_name, outcome, step) => {
    const { deliveryId } = await webhookDelivery();
    await expectWakes(() => attempt(deliveryId, outcome), { inbox: [], delivery: [deliveryId] });
    const [row] = await h.db.sql`select step from deliveries where id = ${deliveryId}`;
    expect(row!.step).toBe(step);
  });

  test('of an attempt cut off mid-way wakes its watchers once', async () => {
    const { deliveryId } = await webhookDelivery();
    await expectWakes(() => recordInterruptedAttempt(h.db.sql, silentLogger, policy, deliveryId), { inbox: [], delivery: [deliveryId] });
  });

  test('of the last attempt cut off fails the delivery in the policy sentence, and wakes once', async () => {
    const { deliveryId } = await webhookDelivery();
    await h.db.sql`update deliveries set send_attempts = 3 where id = ${deliveryId}`;
    await expectWakes(() => recordInterruptedAttempt(h.db.sql, silentLogger, policy, deliveryId), { inbox: [], delivery: [deliveryId] });
    const [row] = await h.db.sql`select step, error from deliveries where id = ${deliveryId}`;
    expect([row!.step, row!.error]).toEqual(['failed', 'Gave up after 4 attempts; the last one was cut off before its outcome was recorded.']);
  });

  test('a retry dropped because the doorbell is no longer owed wakes its watchers once', async () => {
    const { deliveryId } = await webhookDelivery();
    await attemptHeard(deliveryId, { status: 500, error: null });
    await expectWakes(() => forgetNextAttempt(h.db.sql, deliveryId), { inbox: [], delivery: [deliveryId] });
    await expectWakes(() => forgetNextAttempt(h.db.sql, deliveryId), { inbox: [], delivery: [] });
  });
});

describe("an agent's report, read and acknowledgement", () => {
  test('the delivered report wakes once; a repeat wakes nobody', async () => {
    const { deliveryId, recipient } = await webhookDelivery();
    const agent = await agentOf(recipient);
    await expectWakes(() => reportDelivered(h.db.sql, agent, deliveryId), { inbox: [], delivery: [deliveryId] });
    await expectWakes(() => reportDelivered(h.db.sql, agent, deliveryId), { inbox: [], delivery: [] });
  });

  test('an acknowledgement wakes once; a repeat wakes nobody', async () => {
    const { deliveryId, recipient } = await webhookDelivery();
    const agent = await agentOf(recipient);
    await expectWakes(() => acknowledge(h.db.sql, agent, deliveryId), { inbox: [], delivery: [deliveryId] });
    await expectWakes(() => acknowledge(h.db.sql, agent, deliveryId), { inbox: [], delivery: [] });
  });

  test('reading a message wakes its delivery once; reading it again wakes nobody', async () => {
    const { deliveryId, messageId, recipient } = await webhookDelivery();
    const actor = asActor(await agentOf(recipient));
    await expectWakes(() => readMessage(h.db.sql, actor, messageId), { inbox: [], delivery: [deliveryId] });
    await expectWakes(() => readMessage(h.db.sql, actor, messageId), { inbox: [], delivery: [] });
  });

  test("listing a thread's messages wakes each delivery it fetched once", async () => {
    const sender = await h.agent(uniqueName('wake-poster'));
    const reader = await h.agent(uniqueName('wake-reader'));
    const threadId = await h.thread(sender, [reader]);
    const actor = asActor(await agentOf(reader));
    // Posted to a recipient without a webhook, so woken after the commit: heard before the listing.
    for (const content of ['one', 'two']) await wakesOf(() => h.post(sender, threadId, content), 2);
    const ids = (await h.db.sql<{ id: string }[]>`select id from deliveries where thread_id = ${threadId}`).map((r) => r.id);
    await expectWakes(() => listMessages(h.db.sql, actor, threadId, 50), { inbox: [], delivery: ids });
    await expectWakes(() => listMessages(h.db.sql, actor, threadId, 50), { inbox: [], delivery: [] });
  });
});

describe("a person's resend", () => {
  test('of one Failed delivery wakes its watchers once', async () => {
    const { deliveryId } = await failedDelivery();
    await expectWakes(() => resendDelivery(h.db.sql, BY_CLI, deliveryId), { inbox: [], delivery: [deliveryId] });
  });

  test('of every Failed delivery a filter shows wakes each once', async () => {
    const sender = await h.agent(uniqueName('wake-sender'));
    const recipient = await h.agent(uniqueName('wake-hooked'), { webhookUrl: hook });
    const threadId = await h.thread(sender, [recipient]);
    await h.post(sender, threadId, 'fail me');
    await h.post(sender, threadId, 'fail me too');
    const ids = (await h.db.sql<{ id: string }[]>`select id from deliveries where thread_id = ${threadId} order by id`).map((r) => r.id);
    for (const id of ids) await attemptHeard(id, { status: 401, error: null });
    const filter = deliveryFilter({ thread: threadId });
    await expectWakes(() => resendFailed(h.db.sql, BY_CLI, filter, ids.at(-1), 60_000), { inbox: [], delivery: ids });
  });
});

// Each statement that writes deliveries in src, counted per file. A new one must take its place
// in the contract (delivery-wake-ups.ts) and a test above, and then be counted here.
test('every write to deliveries in src is one this file checks', async () => {
  const writes: Record<string, number> = {};
  for await (const path of new Glob('src/**/*.ts').scan('.')) {
    const count = (await Bun.file(path).text()).match(/\b(update|insert into|delete from)\s+deliveries\b/g)?.length ?? 0;
    if (count > 0) writes[path] = count;
  }
  expect(writes).toEqual({
    // reportDelivered, acknowledge
    'src/domain/deliveries/inbox.ts': 2,
    // an attempt's record, an interrupted attempt, a dropped retry, a resend, a re-publish, its failure
    'src/domain/deliveries/delivery-steps.ts': 6,
    // a post, a listing's reads, a message's read
    'src/domain/messages/messages.ts': 3,
  });
});
