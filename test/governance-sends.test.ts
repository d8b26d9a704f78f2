import { describe, expect, test } from 'bun:test';
import { loadConfig } from '../src/config';
import { createService } from '../src/service';
import { silentLogger } from '../src/log';
import { approveHeld, expireHolds, expirySentence, rejectHeld } from '../src/domain/messages/holds';
import { BY_CLI } from '../src/domain/people/audit';
import { confirmClose, requestClose, THREADS_QUOTA_USED } from '../src/domain/threads/threads';
import { MESSAGES_QUOTA_USED } from '../src/domain/messages/messages';
import { asActor } from '../src/domain/agents/actors';
import { callApp, uniqueName, useHarness, type TestAgent } from './support/harness';
import { useListening } from './support/harness';
import { mcpClient } from './support/mcp-client';
import { eventReader } from './support/events';
import { eventually } from './support/receiver';
import { a2aClient } from './support/a2a-client';
import { GetTaskRequest, SendMessageRequest, TaskState, type Task } from '@a2a-js/sdk';

// Quotas, holds and the loop breaker as agents meet them through the post path: counted and held
// in the post's own statement, approved as the post it would have been, rejected, expired.
const h = useHarness({ LOOP_BREAKER_MESSAGES: '5', LOOP_BREAKER_WINDOW_MINUTES: '10' });
const at = useListening(h);

const pair = async (base: string) => {
  const a = await h.agent(uniqueName(`${base}-a`));
  const b = await h.agent(uniqueName(`${base}-b`), { webhookUrl: 'http://127.0.0.1:9/hook' });
  const threadId = await h.thread(a, [b]);
  return { a, b, threadId };
};
const send = (agent: TestAgent, threadId: string, content = 'hello') =>
  h.call('POST', `/api/threads/${threadId}/messages`, { key: agent.key, body: { content } });
const countOf = async (query: Promise<{ n: number }[]>) => (await query)[0]!.n;
const messagesIn = (threadId: string) => countOf(h.db.sql`select count(*)::int as n from messages where thread_id = ${threadId}`);
const deliveriesIn = (threadId: string) => countOf(h.db.sql`select count(*)::int as n from deliveries where thread_id = ${threadId}`);
const jobsFor = (messageId: string) =>
  countOf(h.db.sql`
    select count(*)::int as n from graphile_worker._private_jobs j join deliveries d on j.key = 'notify:' || d.id
    where d.message_id = ${messageId}`);
const person = async () => {
  const [p] = await h.db.sql<{ id: string; email: string; username: string }[]>`
    with u as (insert into usernames (username, owner) values (${uniqueName('ada')}, 'person') returning username)
    insert into people (email, username) select username || '@example.com', username from u returning id, email, username`;
  return { kind: 'person' as const, person: p! };
};

describe('send quotas', () => {
  test("over an agent's messages per minute: 429 with Retry-After and code quota_exceeded, nothing written", async () => {
    const { a, threadId } = await pair('quota');
    await h.db.sql`update agents set messages_per_minute = 3 where username = ${a.username}`;
    for (let i = 0; i < 3; i++) expect((await send(a, threadId)).status).toBe(201);
    const refused = await send(a, threadId);
    expect(refused.status).toBe(429);
    expect(refused.body).toEqual({
      success: false,
      error: MESSAGES_QUOTA_USED,
      code: 'quota_exceeded',
    });
    const seconds = Number(refused.headers.get('retry-after'));
    expect(seconds).toBeGreaterThanOrEqual(1);
    expect(seconds).toBeLessThanOrEqual(60);
    expect(await messagesIn(threadId)).toBe(3);
  });

  test('MCP carries the status, code and seconds in _meta', async () => {
    const { a, threadId } = await pair('quota-mcp');
    await h.db.sql`update agents set messages_per_minute = 1 where username = ${a.username}`;
    const { client, close } = await mcpClient(at.base, a.key);
    try {
      const first = await client.callTool({ name: 'send_message', arguments: { threadId, content: 'one' } });
      expect(first.isError).toBeUndefined();
      const second = await client.callTool({ name: 'send_message', arguments: { threadId, content: 'two' } });
      expect(second.isError).toBe(true);
      expect(second._meta).toEqual({ status: 429, code: 'quota_exceeded', retryAfter: expect.any(Number) });
      expect(await messagesIn(threadId)).toBe(1);
      // Held, then rejected: send_message and message_status say so.
      await h.db.sql`update agents set messages_per_minute = null, holds_messages = true where username = ${a.username}`;
      const held = (await client.callTool({ name: 'send_message', arguments: { threadId, content: 'three' } })) as { structuredContent: any };
      expect(held.structuredContent).toMatchObject({ recipients: 0, held: { reason: 'agent' } });
      await rejectHeld(h.db.sql, BY_CLI, [held.structuredContent.id], 'Not for this thread');
      const status = (await client.callTool({ name: 'message_status', arguments: { messageId: held.structuredContent.id } })) as { structuredContent: any };
      expect(status.structuredContent).toMatchObject({ recipients: [], hold: { state: 'rejected', decidedBy: 'cli', rejectionReason: 'Not for this thread' } });
    } finally {
      await close();
    }
  });

  test('counted atomically across two instances: of 24 concurrent posts under a quota of 10, exactly 10 are written', async () => {
    const { a, threadId } = await pair('quota-race');
    await h.db.sql`update agents set messages_per_minute = 10 where username = ${a.username}`;
    const other = await createService(loadConfig({ DATABASE_URL: h.db.url, DB_POOL_SIZE: '6' }), { log: silentLogger, http: true, worker: false });
    try {
      const statuses = await Promise.all(
        Array.from({ length: 24 }, (_, i) =>
          callApp(i % 2 ? other.app : h.app, 'POST', `/api/threads/${threadId}/messages`, {
            headers: { authorization: `Bearer ${a.key}` },
            body: { content: `race ${i}` },
          }).then((r) => r.status),
        ),
      );
      // A minute's window may turn during the burst; then more than 10 may pass, never fewer.
      const [window] = await h.db.sql<{ turned: boolean }[]>`select date_trunc('minute', now()) <> date_trunc('minute', now() - interval '2 seconds') as turned`;
      if (!window!.turned) {
        expect(statuses.filter((s) => s === 201).length).toBe(10);
        expect(statuses.filter((s) => s === 429).length).toBe(14);
        expect(await messagesIn(threadId)).toBe(10);
      }
    } finally {
      await other.stop();
    }
  });

  test("over an agent's threads per hour: 429, no thread written", async () => {
    const a = await h.agent(uniqueName('threads-quota'));
    await h.db.sql`update agents set threads_per_hour = 2 where username = ${a.username}`;
    const open = () => h.call('POST', '/api/threads', { key: a.key, body: { title: 'one more' } });
    expect((await open()).status).toBe(201);
    expect((await open()).status).toBe(201);
    const refused = await open();
    expect(refused.status).toBe(429);
    expect(refused.body.code).toBe('quota_exceeded');
    expect(refused.body.error).toBe(THREADS_QUOTA_USED);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(await countOf(h.db.sql`select count(*)::int as n from threads t join agents a on a.id = t.opened_by where a.username = ${a.username}`)).toBe(2);
  });
});

describe('approval holds', () => {
  test('a held agent: 202 with held, no delivery, no doorbell job, no event for the recipient; its receipts say held', async () => {
    const { a, b, threadId } = await pair('held');
    await h.db.sql`update agents set holds_messages = true where username = ${a.username}`;
    const posted = await send(a, threadId, 'wait for a person');
    expect(posted.status).toBe(202);
    expect(posted.body.data).toEqual({
      id: expect.any(String),
      threadId,
      createdAt: expect.any(String),
      recipients: 0,
      held: { reason: 'agent', expiresAt: expect.any(String) },
    });
    expect(await messagesIn(threadId)).toBe(0);
    expect(await deliveriesIn(threadId)).toBe(0);
    const inbox = await h.call('GET', '/api/deliveries', { key: b.key });
    expect(inbox.body.data).toEqual([]);
    const receipts = await h.call('GET', `/api/messages/${posted.body.data.id}/deliveries`, { key: a.key });
    expect(receipts.status).toBe(200);
    expect(receipts.body.data).toEqual({
      messageId: posted.body.data.id,
      threadId,
      recipients: [],
      reached: null,
      hold: { state: 'held', reason: 'agent', expiresAt: posted.body.data.held.expiresAt, decidedAt: null, decidedBy: null, rejectionReason: null },
    });
    // The recipient sees nothing of it anywhere: not in the thread's history either.
    const history = await h.call('GET', `/api/threads/${threadId}/messages`, { key: b.key });
    expect(history.body.data).toEqual([]);
  });

  test('approved: written as the post it would have been, deliveries and doorbell jobs in one transaction, audited', async () => {
    const { a, b, threadId } = await pair('approve');
    await h.db.sql`update agents set holds_messages = true where username = ${a.username}`;
    const posted = (await send(a, threadId, 'please approve')).body.data;
    const ada = await person();
    const decided = await approveHeld(h.db.sql, silentLogger, ada, [posted.id]);
    expect(decided).toEqual({ approved: [posted.id], rejected: [] });
    const [message] = await h.db.sql`select id, content from messages where id = ${posted.id}`;
    expect(message).toEqual({ id: posted.id, content: 'please approve' });
    expect(await deliveriesIn(threadId)).toBe(1);
    expect(await jobsFor(posted.id)).toBe(1);
    const inbox = await h.call('GET', '/api/deliveries', { key: b.key });
    expect(inbox.body.data.map((d: { messageId: string }) => d.messageId)).toEqual([posted.id]);
    const receipts = (await h.call('GET', `/api/messages/${posted.id}/deliveries`, { key: a.key })).body.data;
    expect(receipts.recipients.map((r: { username: string }) => r.username)).toEqual([b.username]);
    expect(receipts.hold).toMatchObject({ state: 'approved', decidedBy: ada.person.username, rejectionReason: null });
    const audit = await h.db.sql`select actor, action, subject, before, after from audit_events where subject = ${posted.id}`;
    expect([...audit]).toEqual([{ actor: ada.person.username, action: 'message.approve', subject: posted.id, before: { state: 'held' }, after: { state: 'approved' } }]);
    // Deciding again changes nothing and names nothing.
    expect(await approveHeld(h.db.sql, silentLogger, ada, [posted.id])).toEqual({ approved: [], rejected: [] });
    expect(await deliveriesIn(threadId)).toBe(1);
  });

  test('rejected with a reason: nothing reaches the recipient; the sender is told on its receipts and its event stream', async () => {
    const { a, b, threadId } = await pair('reject');
    await h.db.sql`update agents set holds_messages = true where username = ${a.username}`;
    const leave = new AbortController();
    const stream = await fetch(`${at.base}/api/events`, { headers: { authorization: `Bearer ${a.key}` }, signal: leave.signal });
    const next = eventReader(stream.body!);
    await eventually(async () => (await h.db.sql`select 1 from agents where username = ${a.username} and events_recorded_since is not null`)[0]);
    const posted = (await send(a, threadId, 'not this one')).body.data;
    const held = await next();
    expect(held.event).toBe('message.held');
    expect(held.data).toMatchObject({ messageId: posted.id, threadId, state: 'held', reason: 'agent' });
    const ada = await person();
    await rejectHeld(h.db.sql, ada, [posted.id], 'Off topic for this customer');
    const rejected = await next();
    expect(rejected.event).toBe('message.rejected');
    expect(rejected.data).toMatchObject({ messageId: posted.id, state: 'rejected', rejectionReason: 'Off topic for this customer', decidedBy: ada.person.username });
    leave.abort();
    expect(await deliveriesIn(threadId)).toBe(0);
    expect((await h.call('GET', '/api/deliveries', { key: b.key })).body.data).toEqual([]);
    const receipts = (await h.call('GET', `/api/messages/${posted.id}/deliveries`, { key: a.key })).body.data;
    expect(receipts.hold).toMatchObject({ state: 'rejected', rejectionReason: 'Off topic for this customer' });
    await expect(rejectHeld(h.db.sql, ada, [posted.id], ' ')).rejects.toThrow('reason must be 1 to 500 characters: the sender is told it');
  });

  test('a hold left undecided expires as rejected, by the service', async () => {
    const { a, threadId } = await pair('expire');
    await h.db.sql`update agents set holds_messages = true where username = ${a.username}`;
    const posted = (await send(a, threadId, 'too late')).body.data;
    await h.db.sql`update held_messages set expires_at = now() - interval '1 second' where id = ${posted.id}`;
    expect(await expireHolds(h.db.sql, 100, 168)).toBe(1);
    const [row] = await h.db.sql`select state, rejection_reason, decided_by_name from held_messages where id = ${posted.id}`;
    expect(row).toEqual({ state: 'rejected', rejection_reason: expirySentence(168), decided_by_name: 'service' });
    const [audit] = await h.db.sql`select actor, action from audit_events where subject = ${posted.id}`;
    expect(audit).toEqual({ actor: 'service', action: 'message.reject' });
    expect(await expireHolds(h.db.sql, 100, 168)).toBe(0);
  });

  test('a held thread holds every agent, never a person; approval after the thread closed rejects, saying why', async () => {
    const { a, b, threadId } = await pair('thread-hold');
    await h.db.sql`update threads set holds_messages = true where id = ${threadId}`;
    const posted = await send(b, threadId, 'held by the thread');
    expect([posted.status, posted.body.data.held.reason]).toEqual([202, 'thread']);
    const [opener] = await h.db.sql<{ id: string }[]>`select id from agents where username = ${a.username}`;
    await requestClose(h.db.sql, asActor({ id: opener!.id, username: a.username } as never), threadId);
    await confirmClose(h.db.sql, BY_CLI, threadId);
    const decided = await approveHeld(h.db.sql, silentLogger, BY_CLI, [posted.body.data.id]);
    expect(decided).toEqual({ approved: [], rejected: [{ id: posted.body.data.id, reason: 'The thread closed while the message waited, so it was not sent.' }] });
    expect(await messagesIn(threadId)).toBe(0);
  });
});

describe('the loop breaker', () => {
  test('two agents answering each other past the limit pause the thread; later posts are held; a person resets nothing once paused', async () => {
    const { a, b, threadId } = await pair('loop');
    for (let i = 0; i < 6; i++) expect((await send(i % 2 ? b : a, threadId, `turn ${i}`)).status).toBe(201);
    await eventually(async () => (await h.db.sql`select 1 from threads where id = ${threadId} and paused_at is not null`)[0]);
    const held = await send(a, threadId, 'one more');
    expect([held.status, held.body.data.held.reason]).toEqual([202, 'loop']);
    expect(await messagesIn(threadId)).toBe(6);
  });

  test('one agent talking alone, or a person among the messages, is no loop', async () => {
    const { a, b, threadId } = await pair('no-loop');
    for (let i = 0; i < 8; i++) expect((await send(a, threadId, `monologue ${i}`)).status).toBe(201);
    const second = await pair('person-in');
    const ada = await person();
    for (let i = 0; i < 8; i++) {
      if (i === 4) await h.db.sql`insert into messages (thread_id, sender, content) values (${second.threadId}, ${ada.person.username}, 'a person says')`;
      expect((await send(i % 2 ? second.b : second.a, second.threadId, `turn ${i}`)).status).toBe(201);
    }
    await Bun.sleep(300);
    const paused = await h.db.sql`select id from threads where id in (${threadId}, ${second.threadId}) and paused_at is not null`;
    expect([...paused]).toEqual([]);
    expect(b.username).toBeTruthy();
  });
});

describe('A2A', () => {
  test('a held send is a submitted task named by the message; approved, it becomes its delivery; rejected, A2A rejected', async () => {
    const { a, b } = await pair('a2a-held');
    await h.db.sql`update agents set holds_messages = true where username = ${a.username}`;
    const client = await a2aClient(at.base, a, b.username);
    const sendOne = async (id: string) =>
      (await client.sendMessage(
        SendMessageRequest.fromJSON({ message: { messageId: id, role: 'ROLE_USER', parts: [{ text: `held ${id}` }] }, configuration: { returnImmediately: true } }),
      )) as Task;
    const task = await sendOne(uniqueName('a2a-msg'));
    expect(task.status?.state).toBe(TaskState.TASK_STATE_SUBMITTED);
    const [held] = await h.db.sql<{ id: string }[]>`select id from held_messages where id = ${task.id}`;
    expect(held?.id).toBe(task.id);
    await approveHeld(h.db.sql, silentLogger, BY_CLI, [task.id]);
    const [delivery] = await h.db.sql<{ id: string }[]>`select id from deliveries where message_id = ${task.id}`;
    const approved = await client.getTask(GetTaskRequest.fromJSON({ id: task.id }));
    expect([approved.id, approved.status?.state]).toEqual([delivery!.id, TaskState.TASK_STATE_SUBMITTED]);

    // Over its quota: refused with the HTTP API's status, code and seconds in the error's metadata.
    await h.db.sql`update agents set holds_messages = false, messages_per_minute = 1 where username = ${a.username}`;
    await h.db.sql`delete from send_counts where agent_id = (select id from agents where username = ${a.username})`;
    await sendOne(uniqueName('a2a-msg'));
    const refused = (await sendOne(uniqueName('a2a-msg')).catch((error: unknown) => error)) as Error & { data?: { metadata?: Record<string, string> }[] };
    expect(refused.message).toBe(MESSAGES_QUOTA_USED);
    expect(refused.data?.[0]?.metadata).toEqual({ status: '429', code: 'quota_exceeded', retryAfter: expect.stringMatching(/^\d+$/) });
    await h.db.sql`update agents set holds_messages = true, messages_per_minute = null where username = ${a.username}`;
    const other = await sendOne(uniqueName('a2a-msg'));
    await rejectHeld(h.db.sql, BY_CLI, [other.id], 'Not now');
    const rejected = await client.getTask(GetTaskRequest.fromJSON({ id: other.id }));
    expect(rejected.status?.state).toBe(TaskState.TASK_STATE_REJECTED);
    expect(rejected.status?.message?.parts[0]?.content).toEqual({ $case: 'text', value: `Not sent to ${b.username}: Not now` });
  });
});
