import { describe, expect, test } from 'bun:test';
import { SendMessageRequest, TaskState, type Task } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import { a2aClient, listening } from './support/a2a-client';
import { useHarness, type Harness, type TestAgent } from './support/harness';
import { eventually, receiver, sleep } from './support/receiver';
import { useWorkerHarness } from './support/webhooks';

// A blocking send (returnImmediately false, the SDK client's default) is held until its task
// reaches a state A2A calls terminal, for A2A_SEND_WAIT_MS at most, then answers the task as it
// stands. Driven by the official SDK's client over real HTTP.
let sent = 0;
const message = (text: string, configuration?: Record<string, unknown>) =>
  SendMessageRequest.fromJSON({ message: { messageId: `wait-${++sent}`, role: 'ROLE_USER', parts: [{ text }] }, ...(configuration ? { configuration } : {}) });

const send = async (client: Client, request: SendMessageRequest) => (await client.sendMessage(request)) as Task;

const textOf = (task: Task) => task.status!.message!.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');

// The thread the recipient was sent a message in, as its inbox tells it.
async function threadOf(h: Harness, recipient: TestAgent): Promise<string> {
  return eventually(async () => (await h.call('GET', '/api/deliveries', { key: recipient.key })).body.data?.[0]?.threadId ?? null);
}

describe('held for the answer', () => {
  const h = useHarness({ A2A_SEND_WAIT_MS: '60000' });
  const server = listening(h);

  test('a blocking send answers once the recipient answers, the task completed with the answer; returnImmediately and a stream are not held', async () => {
    const x = await h.agent('held-sender');
    const y = await h.agent('held-recipient');
    const client = await a2aClient(server.base(), x, y.username);
    const started = performance.now();
    const held = send(client, message('Can you confirm the shipment?'));
    // Held: watching its delivery, not answered yet.
    await eventually(async () => h.inboxSignal.watching() === 1);
    const answer = await h.post(y, await threadOf(h, y), 'Confirmed, it leaves Monday.');
    const task = await held;
    expect([task.status!.state, textOf(task), task.status!.message!.messageId]).toEqual([
      TaskState.TASK_STATE_COMPLETED,
      'Confirmed, it leaves Monday.',
      answer.id,
    ]);
    expect(task.history.map((m) => m.messageId)).toEqual([`wait-${sent}`, answer.id]);
    // Woken by the answer, long before the wait's end.
    expect(performance.now() - started).toBeLessThan(30_000);
    expect(h.inboxSignal.watching()).toBe(0);
    // Reading the answer this way records the read, as GetTask does.
    const [read] = await h.db.sql`select d.step from deliveries d join agents a on a.id = d.recipient_id where d.message_id = ${answer.id} and a.username = ${x.username}`;
    expect(read!.step).toBe('fetched');

    // Not held: a send that asks to return at once, and a stream (its events are the wait).
    const quick = await send(client, message('No need to wait', { returnImmediately: true }));
    expect(quick.status!.state).toBe(TaskState.TASK_STATE_SUBMITTED);
    const events = client.sendMessageStream(message('Streamed'));
    const first = (await events.next()).value as { payload: { $case: string; value: Task } };
    expect([first.payload.$case, first.payload.value.status!.state]).toEqual(['task', TaskState.TASK_STATE_SUBMITTED]);
    await events.return(undefined);
  }, 40_000);

  test('a client that leaves ends the wait: nothing is left watching', async () => {
    const x = await h.agent('leaving-sender');
    const y = await h.agent('leaving-recipient');
    const leave = new AbortController();
    const request = fetch(`${server.base()}/a2a/agents/${y.username}/`, {
      method: 'POST',
      headers: { authorization: `Bearer ${x.key}`, 'a2a-version': '1.0', 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: 'leaving', role: 'ROLE_USER', parts: [{ text: 'bye' }] } } }),
      signal: leave.signal,
    }).catch((error: Error) => error.name);
    await eventually(async () => h.inboxSignal.watching() === 1);
    leave.abort();
    expect(await request).toBe('AbortError');
    await eventually(async () => h.inboxSignal.watching() === 0 && h.inboxSignal.streaming() === 0);
  });
});

describe('held no longer than A2A_SEND_WAIT_MS', () => {
  const h = useHarness({ A2A_SEND_WAIT_MS: '1500' });
  const server = listening(h);

  test('a task that has not ended by then is answered as it stands: working, once the recipient read it', async () => {
    const x = await h.agent('bound-sender');
    const y = await h.agent('bound-recipient');
    const client = await a2aClient(server.base(), x, y.username);
    const started = performance.now();
    const held = send(client, message('Read me, no need to answer'));
    await eventually(async () => h.inboxSignal.watching() === 1);
    expect((await h.call('GET', `/api/threads/${await threadOf(h, y)}/messages`, { key: y.key })).status).toBe(200);
    const task = await held;
    expect([task.status!.state, task.metadata!.step, textOf(task)]).toEqual([TaskState.TASK_STATE_WORKING, 'fetched', 'bound-recipient has read it.']);
    expect(performance.now() - started).toBeGreaterThanOrEqual(1_400);
    expect(h.inboxSignal.watching()).toBe(0);
  });
});

describe('held until the doorbell fails', () => {
  // Refused a moment later, so that the send's answer is not simply read after the doorbell failed.
  const refusing = receiver(async () => (await sleep(500), new Response('no', { status: 401 })));
  const { h } = useWorkerHarness({ A2A_SEND_WAIT_MS: '60000', WEBHOOK_TIMEOUT_MS: '5000' });
  const server = listening(h);

  test('failed is terminal for A2A: a blocking send answers it', async () => {
    const x = await h.agent('fail-sender');
    const y = await h.agent('fail-recipient', { webhookUrl: refusing.url('/hook') });
    const client = await a2aClient(server.base(), x, y.username);
    const started = performance.now();
    const task = await send(client, message('Your webhook refuses this'));
    expect([task.status!.state, task.metadata!.step]).toEqual([TaskState.TASK_STATE_FAILED, 'failed']);
    expect(performance.now() - started).toBeLessThan(30_000);
  }, 40_000);
});
