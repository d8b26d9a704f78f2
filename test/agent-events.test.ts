import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { loadConfig } from '../src/config';
import { setArchived } from '../src/domain/agents/agents';
import { pruneHistory } from '../src/domain/messages/retention';
import { removeParticipant } from '../src/domain/threads/threads';
import { postMessage } from '../src/domain/messages/messages';
import type { Sql } from '../src/db/connect';
import { silentLogger } from '../src/log';
import { createService, type HttpService } from '../src/service';
import { callApp, useHarness, type TestAgent } from './support/harness';
import { eventually } from './support/receiver';
import { BY_CLI } from '../src/domain/people/audit';

const h = useHarness({ EVENT_STREAM_STALL_MS: '300', EVENT_HEARTBEAT_MS: '50', HELD_REQUESTS_PER_AGENT: '3' });

type Event = { id?: string; event?: string; data?: any; comment?: string };

// A client of one stream through app.handle(): reads its blocks one at a time, as they come.
async function open(agent: TestAgent, headers: Record<string, string> = {}, query = '') {
  const response = await h.app.handle(
    new Request(`http://localhost/api/events${query}`, { headers: { authorization: `Bearer ${agent.key}`, ...headers } }),
  );
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let ended = false;
  const block = async (): Promise<Event | null> => {
    for (;;) {
      const end = buffer.indexOf('\n\n');
      if (end >= 0) {
        const text = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const field = (name: string) => new RegExp(`^${name}: (.*)$`, 'm').exec(text)?.[1];
        if (text.startsWith(':')) return { comment: text.slice(1).trim() };
        const data = field('data');
        return { id: field('id'), event: field('event'), data: data === undefined ? undefined : JSON.parse(data) };
      }
      if (ended) return null;
      const { value, done } = await reader.read();
      if (done) ended = true;
      else buffer += decoder.decode(value, { stream: true });
    }
  };
  // The next event, past retry lines and heartbeats; null once the stream has ended.
  const next = async (): Promise<Event | null> => {
    for (;;) {
      const got = await block();
      if (got === null || got.event) return got;
    }
  };
  return { response, next, block, close: () => reader.cancel() };
}

async function doorbellData(deliveryId: string) {
  const [row] = await h.db.sql`
    select d.id as "deliveryId", d.message_id as "messageId", d.thread_id as "threadId", t.title as "threadTitle", m.sender, m.content
    from deliveries d join messages m on m.id = d.message_id join threads t on t.id = d.thread_id where d.id = ${deliveryId}`;
  const { content, ...rest } = row!;
  return { ...rest, summary: content };
}

const deliveryOf = async (messageId: string, recipient: TestAgent) =>
  (await h.db.sql`select d.id from deliveries d join agents a on a.id = d.recipient_id where d.message_id = ${messageId} and a.username = ${recipient.username}`)[0]!
    .id as string;

describe('GET /api/events', () => {
  test('message.created carries exactly the doorbell data, in order; resuming after an id sends what came after, once', async () => {
    const sender = await h.agent('events-sender');
    const reader = await h.agent('events-reader');
    const threadId = await h.thread(sender, [reader], 'Stream me');
    const stream = await open(reader);
    expect(stream.response.status).toBe(200);
    expect(stream.response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    const posted = [];
    for (const text of ['one', 'two', 'three']) posted.push(await h.post(sender, threadId, text));
    const seen = [];
    for (let i = 0; i < 3; i++) seen.push((await stream.next())!);
    expect(seen.map((e) => e.event)).toEqual(['message.created', 'message.created', 'message.created']);
    expect(seen.map((e) => e.data.messageId)).toEqual(posted.map((p) => p.id));
    for (const e of seen) expect(e.data).toEqual(await doorbellData(e.data.deliveryId));
    expect(Object.keys(seen[0]!.data)).toEqual(['deliveryId', 'messageId', 'threadId', 'threadTitle', 'sender', 'summary']);
    // The client goes away after the second event; two more arrive meanwhile.
    await stream.close();
    for (const text of ['four', 'five']) posted.push(await h.post(sender, threadId, text));
    const resumed = await open(reader, { 'last-event-id': seen[1]!.id! });
    expect(resumed.response.status).toBe(200);
    const after = [];
    for (let i = 0; i < 3; i++) after.push((await resumed.next())!);
    expect(after.map((e) => e.data.messageId)).toEqual(posted.slice(2).map((p) => p.id));
    expect(after[0]!.id).toBe(seen[2]!.id);
    // The query form resumes the same way.
    const byQuery = await open(reader, {}, `?lastEventId=${encodeURIComponent(after[1]!.id!)}`);
    expect((await byQuery.next())!.id).toBe(after[2]!.id);
    await resumed.close();
    await byQuery.close();
  });

  test('the sender hears delivery.delivered and delivery.fetched for its own message, and reading its stream records nothing', async () => {
    const sender = await h.agent('receipt-sender');
    const reader = await h.agent('receipt-reader');
    const threadId = await h.thread(sender, [reader], 'Receipts');
    const senderStream = await open(sender);
    const readerStream = await open(reader);
    const { id: messageId } = await h.post(sender, threadId, 'read me');
    const deliveryId = await deliveryOf(messageId, reader);
    expect((await readerStream.next())!.data.deliveryId).toBe(deliveryId);
    const [untouched] = await h.db.sql`select step, delivered_at, fetched_at from deliveries where id = ${deliveryId}`;
    expect(untouched).toEqual({ step: 'accepted', delivered_at: null, fetched_at: null });
    expect((await h.call('POST', `/api/deliveries/${deliveryId}/delivered`, { key: reader.key })).status).toBe(200);
    expect((await h.call('GET', `/api/threads/${threadId}/messages`, { key: reader.key })).status).toBe(200);
    const [stored] = await h.db.sql`select delivered_at, fetched_at from deliveries where id = ${deliveryId}`;
    const delivered = (await senderStream.next())!;
    const fetched = (await senderStream.next())!;
    expect(delivered.event).toBe('delivery.delivered');
    expect(delivered.data).toEqual({ deliveryId, messageId, threadId, recipient: reader.username, at: stored!.delivered_at.toISOString() });
    expect(fetched.event).toBe('delivery.fetched');
    expect(fetched.data).toEqual({ deliveryId, messageId, threadId, recipient: reader.username, at: stored!.fetched_at.toISOString() });
    // A second report and a second read are no new events: the next one the sender hears is its next message's.
    await h.call('POST', `/api/deliveries/${deliveryId}/delivered`, { key: reader.key });
    await h.call('GET', `/api/threads/${threadId}/messages`, { key: reader.key });
    const { id: second } = await h.post(reader, threadId, 'and back');
    expect((await senderStream.next())!).toMatchObject({ event: 'message.created', data: { messageId: second } });
    await senderStream.close();
    await readerStream.close();
  });

  test("an agent's events are recorded from its first stream on: one that never streams costs its senders no rows", async () => {
    const sender = await h.agent('recorded-sender');
    const reader = await h.agent('recorded-reader');
    const threadId = await h.thread(sender, [reader], 'Recorded');
    const rowsFor = async (agent: TestAgent) =>
      (await h.db.sql`select count(*)::int as n from agent_events e join agents a on a.id = e.agent_id where a.username = ${agent.username}`)[0]!.n;
    await h.post(sender, threadId, 'before any stream');
    expect(await rowsFor(reader)).toBe(0);
    const [unmarked] = await h.db.sql`select events_recorded_since from agents where username = ${reader.username}`;
    expect(unmarked!.events_recorded_since).toBeNull();
    const stream = await open(reader);
    const [marked] = await h.db.sql`select events_recorded_since from agents where username = ${reader.username}`;
    expect(marked!.events_recorded_since).toBeInstanceOf(Date);
    const { id } = await h.post(sender, threadId, 'after the first stream');
    expect((await stream.next())!.data.messageId).toBe(id);
    expect(await rowsFor(reader)).toBe(1);
    // The sender never streamed: reading its message records no receipt event for it.
    expect((await h.call('GET', `/api/threads/${threadId}/messages`, { key: reader.key })).status).toBe(200);
    expect(await rowsFor(sender)).toBe(0);
    await stream.close();
  });

  test('a post still running when an agent opens its first stream is either in the inbox read after it or sent on the stream', async () => {
    const sender = await h.agent('racing-sender');
    const reader = await h.agent('racing-reader');
    const threadId = await h.thread(sender, [reader], 'Racing the first stream');
    const [senderRow] = await h.db.sql<{ id: string }[]>`select id from agents where username = ${sender.username}`;
    const posted = Promise.withResolvers<string>();
    const release = Promise.withResolvers<void>();
    // A post written and not yet committed when the stream opens; it commits a moment later.
    const running = h.db.sql.begin(async (tx) => {
      const { id } = await postMessage(tx as unknown as Sql, silentLogger, { kind: 'agent', id: senderRow!.id, username: sender.username }, threadId, {
        content: 'written before the stream, committed after',
      });
      posted.resolve(id);
      await release.promise;
    });
    const racingId = await posted.promise;
    setTimeout(() => release.resolve(), 300);
    // As the docs say: open the stream, then read the inbox.
    const stream = await open(reader);
    const inbox = (await h.call('GET', '/api/deliveries', { key: reader.key })).body.data.map((e: { messageId: string }) => e.messageId);
    await running;
    const { id: laterId } = await h.post(sender, threadId, 'after');
    const streamed: string[] = [];
    while (!streamed.includes(laterId)) streamed.push((await stream.next())!.data.messageId);
    expect([...inbox, ...streamed].filter((id) => id === racingId)).toHaveLength(1);
    await stream.close();
  });

  test('heartbeat comments keep an idle stream talking', async () => {
    const idle = await h.agent('idle-listener');
    const stream = await open(idle);
    expect(await stream.block()).toEqual({ id: undefined, event: undefined, data: undefined });
    expect(await stream.block()).toEqual({ comment: 'keep-alive' });
    await stream.close();
  });

  test('an event committed behind an older transaction still running waits for it, and both come in order', async () => {
    const sender = await h.agent('held-sender');
    const reader = await h.agent('held-reader');
    const threadId = await h.thread(sender, [reader], 'Held');
    const stream = await open(reader);
    const { id: firstMessage } = await h.post(sender, threadId, 'first');
    expect((await stream.next())!.data.messageId).toBe(firstMessage);
    const firstDelivery = await deliveryOf(firstMessage, reader);
    const older = Promise.withResolvers<void>();
    const began = Promise.withResolvers<void>();
    // An older transaction takes its id first and writes an event for the reader, but commits last.
    const writing = h.db.sql.begin(async (tx) => {
      await tx`insert into agent_events (agent_id, type, delivery_id)
               select recipient_id, 'message.created', id from deliveries where id = ${firstDelivery}`;
      began.resolve();
      await older.promise;
    });
    await began.promise;
    let first: Promise<Event | null>;
    let laterMessage: string;
    try {
      laterMessage = (await h.post(sender, threadId, 'later')).id;
      const [pending] = await h.db.sql`select count(*)::int as n from agent_events e join agents a on a.id = e.agent_id where a.username = ${reader.username}`;
      expect(pending!.n).toBe(2);
      first = stream.next();
      let arrived = false;
      void first.then(() => (arrived = true));
      await Bun.sleep(200);
      expect(arrived).toBe(false);
    } finally {
      // Left open, it would hold back every later event of this database's tests.
      older.resolve();
      await writing;
    }
    expect((await first)!.data.messageId).toBe(firstMessage);
    expect((await stream.next())!.data.messageId).toBe(laterMessage);
    await stream.close();
  });

  test('a participant removed from a thread hears nothing more of it; its other threads go on', async () => {
    const sender = await h.agent('visible-sender');
    const reader = await h.agent('visible-reader');
    const bystander = await h.agent('visible-bystander');
    const leaving = await h.thread(sender, [reader, bystander], 'Leaving');
    const staying = await h.thread(sender, [reader], 'Staying');
    const stream = await open(reader);
    await h.post(sender, leaving, 'before');
    const before = (await stream.next())!;
    expect(before.data.threadId).toBe(leaving);
    await h.post(sender, leaving, 'posted before the removal, read after it');
    expect((await stream.next())!.data.summary).toBe('posted before the removal, read after it');
    await removeParticipant(h.db.sql, BY_CLI, leaving, reader.username);
    await h.post(sender, leaving, 'after');
    const { id } = await h.post(sender, staying, 'elsewhere');
    expect((await stream.next())!.data).toMatchObject({ threadId: staying, messageId: id });
    // Resumed from before the removal, what the thread got meanwhile is passed over too.
    const resumed = await open(reader, { 'last-event-id': before.id! });
    expect((await resumed.next())!.data).toMatchObject({ threadId: staying, messageId: id });
    await stream.close();
    await resumed.close();
  });

  test('archiving the agent ends its stream, and reconnecting is 401', async () => {
    const agent = await h.agent('archived-listener');
    const stream = await open(agent);
    await setArchived(h.db.sql, BY_CLI, agent.username, true);
    expect(await stream.next()).toBeNull();
    const again = await h.call('GET', '/api/events', { key: agent.key });
    expect(again.status).toBe(401);
    expect(again.body).toEqual({ success: false, error: 'The API key is not recognised or its agent is archived.' });
  });

  test('a client that stops reading holds one page of events at most, is cut when it leaves the next unread, and resumes by id', async () => {
    const sender = await h.agent('flood-sender');
    const reader = await h.agent('slow-reader');
    const threadId = await h.thread(sender, [reader], 'A flood');
    const stream = await open(reader);
    const posted = [];
    for (let i = 0; i < 150; i++) posted.push((await h.post(sender, threadId, `message ${i}`)).id);
    await Bun.sleep(600);
    const read = [];
    for (let e = await stream.next(); e; e = await stream.next()) read.push(e);
    // What went out before the queue passed its high-water mark (16 KiB), in order; the rest waited
    // in the database for room that never came.
    expect(read.length).toBeGreaterThan(0);
    expect(read.length).toBeLessThan(150);
    expect(read.map((e) => e.data.messageId)).toEqual(posted.slice(0, read.length));
    const resumed = await open(reader, { 'last-event-id': read.at(-1)!.id! });
    const rest = [];
    while (rest.length < 150 - read.length) rest.push((await resumed.next())!.data.messageId);
    expect(rest).toEqual(posted.slice(read.length));
    await resumed.close();
  });
});

describe('refusals', () => {
  test('no key is 401; a Last-Event-ID that is not ours is 400 naming it; one past retention is 410', async () => {
    const agent = await h.agent('refused-listener');
    const none = await h.call('GET', '/api/events');
    expect(none.status).toBe(401);
    const notOurs = 'Last-Event-ID must be the id of an event this stream sent (two whole numbers joined by "-").';
    for (const id of ['12', 'abc-1', '1-99999999999999999999', '99999999999999-1']) {
      const bad = await h.call('GET', '/api/events', { key: agent.key, headers: { 'last-event-id': id } });
      expect([bad.status, bad.body]).toEqual([400, { success: false, error: notOurs }]);
    }

    const sender = await h.agent('old-sender');
    const threadId = await h.thread(sender, [agent], 'Old');
    const stream = await open(agent);
    await h.post(sender, threadId, 'old one');
    await h.post(sender, threadId, 'old two');
    const first = (await stream.next())!;
    const second = (await stream.next())!;
    await stream.close();
    await h.db.sql`update agent_events set created_at = now() - interval '2 hours' where delivery_id = ${first.data.deliveryId}`;
    const pruned = await pruneHistory(h.db.sql, { attemptLogDays: 30, deadJobDays: 7, messageDays: null, eventHours: 1, auditDays: 365 });
    expect(pruned.agentEvents).toBe(1);
    // Resuming from before what was swept is refused; from the swept event itself, nothing is missing.
    const [floor] = await h.db.sql`select xid::text || '-' || seq as id from agent_event_floors f join agents a on a.id = f.agent_id where a.username = ${agent.username}`;
    expect(floor!.id).toBe(first.id);
    const [older] = await h.db.sql`select (pg_snapshot_xmin(pg_current_snapshot())::text::numeric - 1000)::text as xid`;
    const gone = await h.call('GET', '/api/events', { key: agent.key, headers: { 'last-event-id': `${older!.xid}-1` } });
    expect(gone.status).toBe(410);
    expect(gone.body).toEqual({
      success: false,
      error: 'Events after that id are no longer kept (a stream keeps 168 hours of events): open the stream without Last-Event-ID, then read your inbox (GET /api/deliveries).',
    });
    const fine = await open(agent, { 'last-event-id': first.id! });
    expect(fine.response.status).toBe(200);
    expect((await fine.next())!.id).toBe(second.id);
    await fine.close();
  });

  test('an id never given to the agent is 400, however plausible: a made-up position, an event of another agent, one of its own with the order changed', async () => {
    const sender = await h.agent('made-up-sender');
    const agent = await h.agent('made-up-listener');
    const other = await h.agent('made-up-other');
    const threadId = await h.thread(sender, [agent, other], 'Made up');
    const mine = await open(agent);
    const theirs = await open(other);
    await h.post(sender, threadId, 'one');
    const event = (await mine.next())!;
    const foreign = (await theirs.next())!;
    await mine.close();
    await theirs.close();
    const [xid, seq] = event.id!.split('-');
    const notOurs = { success: false, error: 'Last-Event-ID must be the id of an event this stream sent (two whole numbers joined by "-").' };
    // A stream wrongly opened is let go, so that the test fails on its status rather than waiting.
    const answer = async (path: string, headers: Record<string, string> = {}) => {
      const response = await h.app.handle(new Request(`http://localhost${path}`, { headers: { authorization: `Bearer ${agent.key}`, ...headers } }));
      if (response.status === 200) return void (await response.body!.cancel());
      return [response.status, await response.json()];
    };
    for (const id of ['0-0', '1-1', `${xid}-${BigInt(seq!) + 1000n}`, `${BigInt(xid!) - 1n}-${seq}`, foreign.id!]) {
      expect([id, await answer('/api/events', { 'last-event-id': id })]).toEqual([id, [400, notOurs]]);
      expect([id, await answer(`/api/events?lastEventId=${encodeURIComponent(id)}`)]).toEqual([id, [400, notOurs]]);
    }
    // Its own id resumes, with what came after it.
    const { id: later } = await h.post(sender, threadId, 'two');
    const resumed = await open(agent, { 'last-event-id': event.id! });
    expect(resumed.response.status).toBe(200);
    expect((await resumed.next())!.data.messageId).toBe(later);
    await resumed.close();
  });
});

describe('streams held at once', () => {
  const tooMany = {
    success: false,
    error: 'This agent already holds 3 requests open on this server (streams and waiting requests together), the most one agent may: close one before opening another.',
  };
  const mcpStream = (agent: TestAgent, signal?: AbortSignal) =>
    h.app.handle(new Request('http://localhost/mcp', { headers: { authorization: `Bearer ${agent.key}`, accept: 'text/event-stream' }, signal }));
  const a2a = (agent: TestAgent, to: TestAgent, method: string, params: unknown) =>
    h.app.handle(
      new Request(`http://localhost/a2a/agents/${to.username}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${agent.key}`, 'content-type': 'application/json', 'a2a-version': '1.0' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 7, method, params }),
      }),
    );
  const refusalOf = async (response: Response) => {
    if (response.status === 200 && response.headers.get('content-type')?.startsWith('text/event-stream')) {
      await response.body!.cancel();
      return 'a stream';
    }
    return [response.status, await response.json()];
  };
  const messagesFrom = async (agent: TestAgent) =>
    (await h.db.sql`select count(*)::int as n from messages m join agents a on a.id = m.sender_agent_id where a.username = ${agent.username}`)[0]!.n;

  test('an agent holds at most HELD_REQUESTS_PER_AGENT at once, through every door together; one more is refused before anything is done, until one ends', async () => {
    const agent = await h.agent('many-streams');
    const peer = await h.agent('many-streams-peer');
    const first = await open(agent);
    const second = await open(agent);
    const mcp = await mcpStream(agent);
    expect([first.response.status, second.response.status, mcp.status]).toEqual([200, 200, 200]);

    expect(await refusalOf(await h.app.handle(new Request('http://localhost/api/events', { headers: { authorization: `Bearer ${agent.key}` } })))).toEqual([429, tooMany]);
    expect(await refusalOf(await mcpStream(agent))).toEqual([429, tooMany]);
    const sent = await messagesFrom(agent);
    const streamed = await a2a(agent, peer, 'SendStreamingMessage', { message: { messageId: 'one-too-many', role: 'ROLE_USER', parts: [{ text: 'hello' }] } });
    const invalidParams = [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', domain: 'a2a-protocol.org', reason: 'INVALID_PARAMS' }];
    expect(await refusalOf(streamed)).toEqual([200, { jsonrpc: '2.0', id: 7, error: { code: -32602, message: tooMany.error, data: invalidParams } }]);
    // Refused before the message was sent: nothing was posted.
    expect(await messagesFrom(agent)).toBe(sent);
    // The bound is each agent's own.
    const other = await open(peer);
    expect(other.response.status).toBe(200);
    await other.close();

    // A stream that ends gives its place back, whichever door it came through.
    await first.close();
    const again = await open(agent);
    expect(again.response.status).toBe(200);
    await mcp.body!.cancel();
    const viaA2A = await a2a(agent, peer, 'SendStreamingMessage', { message: { messageId: 'now-there-is-room', role: 'ROLE_USER', parts: [{ text: 'hello' }] } });
    expect(viaA2A.headers.get('content-type')).toStartWith('text/event-stream');
    expect(await messagesFrom(agent)).toBe(sent + 1);
    expect(await refusalOf(await mcpStream(agent))).toEqual([429, tooMany]);
    await viaA2A.body!.cancel();
    await second.close();
    await again.close();
  });

  test('waits hold places too: the inbox wait, receipts waitFor, MCP waits and A2A blocking sends; a wait of 0 holds none, and an ended wait gives its place back', async () => {
    const agent = await h.agent('many-waits');
    const peer = await h.agent('many-waits-peer');
    const thread = (await h.call('POST', '/api/threads', { key: agent.key, body: { title: 'Waits', participantUsernames: [peer.username] } })).body.data.id;
    const mine = (await h.call('POST', `/api/threads/${thread}/messages`, { key: agent.key, body: { content: 'wait for me' } })).body.data.id;
    const get = (path: string, signal?: AbortSignal) =>
      h.app.handle(new Request(`http://localhost${path}`, { headers: { authorization: `Bearer ${agent.key}` }, signal }));
    const mcpCall = (name: string, args: Record<string, unknown>) =>
      h.app.handle(
        new Request('http://localhost/mcp', {
          method: 'POST',
          headers: { authorization: `Bearer ${agent.key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } }),
        }),
      );
    const toolText = async (response: Response) => {
      const text = await response.text();
      const json = JSON.parse(text.startsWith('{') ? text : text.split('\ndata: ')[1]!.split('\n')[0]!);
      return [json.result.isError ?? false, json.result.content[0].text];
    };

    const leaving = new AbortController();
    const inboxWait = get('/api/deliveries?wait=20', leaving.signal);
    const receiptsWait = get(`/api/messages/${mine}/deliveries?waitFor=fetched&wait=20`, leaving.signal);
    const stream = await open(agent);
    // Three held (once both waits have reached their places): a fourth wait of any kind is refused
    // before it waits.
    await eventually(async () => (await get('/api/deliveries?wait=0.05')).status === 429 || null);
    expect(await refusalOf(await get('/api/deliveries?wait=5'))).toEqual([429, tooMany]);
    expect(await refusalOf(await get(`/api/messages/${mine}/deliveries?waitFor=delivered&wait=5`))).toEqual([429, tooMany]);
    expect(await toolText(await mcpCall('check_inbox', { wait: 5 }))).toEqual([true, tooMany.error]);
    expect(await toolText(await mcpCall('message_status', { messageId: mine, waitFor: 'fetched', wait: 5 }))).toEqual([true, tooMany.error]);
    const sent = await messagesFrom(agent);
    const blocking = await a2a(agent, peer, 'SendMessage', { message: { messageId: 'blocked-send', role: 'ROLE_USER', parts: [{ text: 'hello' }] } });
    expect(((await blocking.json()) as { error: unknown }).error).toMatchObject({ code: -32602, message: tooMany.error });
    expect(await messagesFrom(agent)).toBe(sent);
    // Without a wait nothing is held.
    expect((await get('/api/deliveries')).status).toBe(200);
    expect((await get(`/api/messages/${mine}/deliveries`)).status).toBe(200);
    const returned = await a2a(agent, peer, 'SendMessage', {
      message: { messageId: 'not-held', role: 'ROLE_USER', parts: [{ text: 'hello' }] },
      configuration: { returnImmediately: true },
    });
    expect(((await returned.json()) as { result: { task: { status: { state: string } } } }).result.task.status.state).toBe('TASK_STATE_SUBMITTED');

    // The waits end (their clients leave): their places come back.
    leaving.abort();
    await Promise.allSettled([inboxWait, receiptsWait]);
    await eventually(async () => (await get('/api/deliveries?wait=0.05')).status === 200 || null);
    expect((await get(`/api/messages/${mine}/deliveries?waitFor=fetched&wait=0.05`)).status).toBe(200);
    await stream.close();
  });

  test('a stream refused, failed or abandoned before it started holds no place', async () => {
    const agent = await h.agent('no-leaks');
    const held = await open(agent);
    for (let i = 0; i < 5; i++) {
      // Refused by the domain after the place was taken.
      const refused = await h.app.handle(new Request('http://localhost/api/events', { headers: { authorization: `Bearer ${agent.key}`, 'last-event-id': '0-0' } }));
      expect(refused.status).toBe(400);
      await refused.body?.cancel();
      // The client left while the stream was being opened.
      const gone = await h.app.handle(new Request('http://localhost/api/events', { headers: { authorization: `Bearer ${agent.key}` }, signal: AbortSignal.abort() }));
      expect(gone.status).toBe(200);
      expect((await mcpStream(agent, AbortSignal.abort())).status).toBe(200);
      // A client of /mcp that does not take a stream is refused by the transport.
      const notAStream = await h.app.handle(new Request('http://localhost/mcp', { headers: { authorization: `Bearer ${agent.key}`, accept: 'application/json' } }));
      expect(notAStream.status).toBe(406);
      await notAStream.body?.cancel();
    }
    const more = [await open(agent), await open(agent)];
    expect(more.map((s) => s.response.status)).toEqual([200, 200]);
    expect(await refusalOf(await h.app.handle(new Request('http://localhost/api/events', { headers: { authorization: `Bearer ${agent.key}` } })))).toEqual([429, tooMany]);
    for (const s of [held, ...more]) await s.close();
  });
});

describe('two instances', () => {
  let other: HttpService;
  beforeAll(async () => {
    other = await createService(loadConfig({ WEBHOOK_ALLOW_LOCAL: 'true', DATABASE_URL: h.db.url, DB_POOL_SIZE: '5' }), { log: silentLogger, http: true, worker: false });
  });
  afterAll(() => other?.stop());

  test('a post through one instance reaches a stream held on the other', async () => {
    const sender = await h.agent('far-sender');
    const reader = await h.agent('far-reader');
    const threadId = await h.thread(sender, [reader], 'Far');
    const response = await other.app.handle(new Request('http://localhost/api/events', { headers: { authorization: `Bearer ${reader.key}` } }));
    expect(response.status).toBe(200);
    const { id } = (await callApp(h.app, 'POST', `/api/threads/${threadId}/messages`, { headers: { authorization: `Bearer ${sender.key}` }, body: { content: 'across' } })).body.data;
    const reader2 = response.body!.getReader();
    let text = '';
    while (!text.includes('event: message.created')) text += new TextDecoder().decode((await reader2.read()).value);
    expect(text).toContain(`"messageId":"${id}"`);
    await reader2.cancel();
  });
});
