import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { uniqueName, type TestAgent } from './support/harness';
import { mcpClient } from './support/mcp-client';
import { eventually, receiver } from './support/receiver';
import { untilStep, useWorkerHarness } from './support/webhooks';

// A sender's delivery receipts, with the real webhook worker ringing a real local handler.
const { h } = useWorkerHarness({ STALLED_AFTER_MS: '600000' });
const hook = receiver((req) => new Response('', { status: req.path === '/refuses' ? 401 : 200 }));
let sender: TestAgent;
let hooked: TestAgent;
let polling: TestAgent;
let refusing: TestAgent;
let stranger: TestAgent;
let threadId: string;

beforeAll(async () => {
  sender = await h.agent(uniqueName('sender'));
  hooked = await h.agent(uniqueName('hooked'), { webhookUrl: hook.url('/hooked') });
  polling = await h.agent(uniqueName('polling'));
  refusing = await h.agent(uniqueName('refusing'), { webhookUrl: hook.url('/refuses') });
  stranger = await h.agent(uniqueName('stranger'));
  threadId = await h.thread(sender, [hooked, polling]);
});

const receipts = (messageId: string, key = sender.key, query = '') => h.call('GET', `/api/messages/${messageId}/deliveries${query}`, { key });
const deliveryOf = async (messageId: string, agent: TestAgent) =>
  (await h.db.sql`select d.id from deliveries d join agents a on a.id = d.recipient_id where d.message_id = ${messageId} and a.username = ${agent.username}`)[0]!.id as string;
const stepsOf = (body: { data: { recipients: { username: string; step: string }[] } }) =>
  Object.fromEntries(body.data.recipients.map((r) => [r.username, r.step]));

describe('receipts', () => {
  test("show each recipient's step and times, to the sender only, and nothing the contract hides", async () => {
    const posted = await h.post(sender, threadId, 'the secret body');
    const delivery = await deliveryOf(posted.id, hooked);
    await untilStep(h, delivery, 'notified');
    const res = await receipts(posted.id);
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ messageId: posted.id, threadId, reached: null });
    const [first, second] = res.body.data.recipients;
    expect([first.username, second.username]).toEqual([hooked.username, polling.username].sort());
    const byName = Object.fromEntries(res.body.data.recipients.map((r: { username: string }) => [r.username, r]));
    expect(byName[hooked.username]).toMatchObject({ step: 'notified', failedStep: null, webhook: true, retrying: false, stalled: false, deliveredAt: null });
    expect(byName[hooked.username].notifiedAt).toEqual(expect.any(String));
    expect(byName[polling.username]).toMatchObject({ step: 'accepted', webhook: false, notifiedAt: null, fetchedAt: null });
    const text = JSON.stringify(res.body);
    for (const hidden of ['the secret body', hook.url(''), 'whsec_', 'agt_', '127.0.0.1']) expect(text).not.toContain(hidden);
    for (const other of [hooked, polling, stranger]) {
      const refused = await receipts(posted.id, other.key);
      expect([refused.status, refused.body]).toEqual([404, { success: false, error: 'No such message sent by you.' }]);
    }
    expect((await receipts('not-an-id')).status).toBe(404);
  });

  test('a bad waitFor or wait is refused with its sentence', async () => {
    const posted = await h.post(sender, threadId, 'bad waits');
    const badStep = await receipts(posted.id, sender.key, '?waitFor=read');
    expect([badStep.status, badStep.body]).toEqual([400, { success: false, error: 'waitFor must be delivered or fetched' }]);
    const badWait = await receipts(posted.id, sender.key, '?waitFor=fetched&wait=61');
    expect([badWait.status, badWait.body]).toEqual([400, { success: false, error: 'wait must be a number of seconds from 0 to 60' }]);
  });

  test('waitFor holds until every recipient reached the step, woken by the change itself', async () => {
    const posted = await h.post(sender, threadId, 'wait for it');
    const held = receipts(posted.id, sender.key, '?waitFor=fetched&wait=30');
    // The sender's request is watching its deliveries before anyone reads.
    await eventually(async () => h.inboxSignal.watching() === 2);
    expect((await h.call('GET', `/api/threads/${threadId}/messages`, { key: polling.key })).status).toBe(200);
    await eventually(async () => (await h.db.sql`select step from deliveries where id = ${await deliveryOf(posted.id, polling)}`)[0]!.step === 'fetched');
    expect(h.inboxSignal.watching()).toBe(2);
    const started = performance.now();
    await h.call('GET', `/api/threads/${threadId}/messages`, { key: hooked.key });
    const answer = await held;
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(answer.status).toBe(200);
    expect(answer.body.data.reached).toBe(true);
    expect(stepsOf(answer.body)).toEqual({ [hooked.username]: 'fetched', [polling.username]: 'fetched' });
    expect(h.inboxSignal.watching()).toBe(0);
  });

  test('a failed recipient counts as reached; a wait that ends answers where things are', async () => {
    const otherThread = await h.thread(sender, [refusing, polling]);
    const posted = await h.post(sender, otherThread, 'one refuses');
    await untilStep(h, await deliveryOf(posted.id, refusing), 'failed');
    const ended = await receipts(posted.id, sender.key, '?waitFor=delivered&wait=0.3');
    expect(ended.body.data.reached).toBe(false);
    expect(stepsOf(ended.body)).toEqual({ [refusing.username]: 'failed', [polling.username]: 'accepted' });
    await h.call('GET', `/api/threads/${otherThread}/messages`, { key: polling.key });
    const reached = await receipts(posted.id, sender.key, '?waitFor=delivered&wait=5');
    expect(reached.body.data.reached).toBe(true);
    expect(reached.body.data.recipients.find((r: { username: string }) => r.username === refusing.username)).toMatchObject({
      step: 'failed',
      failedStep: 'accepted',
    });
  });
});

describe('message_status over MCP', () => {
  let base: string;
  beforeAll(() => {
    h.app.listen({ port: 0, hostname: '127.0.0.1' });
    base = `http://127.0.0.1:${h.app.server!.port}`;
  });
  afterAll(() => h.app.stop(true));

  test('the same receipts and rules as the HTTP route', async () => {
    const client = await mcpClient(base, sender.key);
    const posted = await h.post(sender, threadId, 'over MCP');
    await h.call('GET', `/api/threads/${threadId}/messages`, { key: polling.key });
    await h.call('GET', `/api/threads/${threadId}/messages`, { key: hooked.key });
    const { data } = await client.call('message_status', { messageId: posted.id, waitFor: 'fetched', wait: 5 });
    // The doorbell to the hooked recipient may still be answered in between, so the fields that
    // cannot change any more are compared.
    const settled = (r: { messageId: string; reached: boolean; recipients: { username: string; step: string; fetchedAt: string }[] }) => [
      r.messageId,
      r.reached,
      r.recipients.map((x) => [x.username, x.step, x.fetchedAt]),
    ];
    expect(settled(data)).toEqual(settled((await receipts(posted.id, sender.key, '?waitFor=fetched')).body.data));
    expect(data.reached).toBe(true);
    const other = await mcpClient(base, polling.key);
    expect(await other.call('message_status', { messageId: posted.id })).toEqual({ error: 'No such message sent by you.' });
    expect(await client.call('message_status', { messageId: posted.id, waitFor: 'read' })).toEqual({ error: 'waitFor must be delivered or fetched' });
    await Promise.all([client.close(), other.close()]);
  });
});
