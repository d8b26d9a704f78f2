import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { useHarness } from './support/harness';
import { eventually } from './support/receiver';
import { mcpClient } from './support/mcp-client';
import { EMOJI, POSTS_AT_BOUNDS } from './support/emoji';

const h = useHarness();
// U+1F600, one character of two UTF-16 code units.
let base: string;
type Client = Awaited<ReturnType<typeof mcpClient>>;
let alice: Client, bob: Client, carol: Client;
let keys: Record<string, string>;

beforeAll(async () => {
  keys = {};
  for (const name of ['alice', 'bob', 'carol', 'dave']) keys[name] = (await h.agent(name)).key;
  h.app.listen({ port: 0, hostname: '127.0.0.1' });
  base = `http://127.0.0.1:${h.app.server!.port}`;
  alice = await mcpClient(base, keys.alice!);
  bob = await mcpClient(base, keys.bob!);
  carol = await mcpClient(base, keys.carol!);
});

afterAll(async () => {
  await Promise.all([alice, bob, carol].map((c) => c?.close()));
  await h.app.stop(true);
});

const post = (body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${base}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify(body),
  });
const listToolsRpc = { jsonrpc: '2.0', id: 1, method: 'tools/list' };

const deliveryOf = async (messageId: string, username: string) => {
  const [row] = await h.db.sql`
    select d.step, d.fetched_at, d.acknowledged_at from deliveries d join agents a on a.id = d.recipient_id
    where d.message_id = ${messageId} and a.username = ${username}`;
  return row!;
};

async function openThread(participants = ['bob']) {
  const opened = await alice.call('open_thread', { title: 'Plans', goal: 'Agree', participantUsernames: participants });
  return opened.data as { id: string };
}

describe('authentication at the HTTP level', () => {
  test('no key, a malformed key and an unknown key get 401 in the envelope', async () => {
    const none = await post(listToolsRpc);
    expect(none.status).toBe(401);
    expect(await none.json()).toEqual({
      success: false,
      error: 'Authorization header is missing; send "Authorization: Bearer agt_…".',
    });
    const malformed = await post(listToolsRpc, { authorization: 'Bearer sk_nope' });
    expect(malformed.status).toBe(401);
    expect(await malformed.json()).toEqual({ success: false, error: 'The API key is malformed: an agent key is agt_ and 43 more letters, digits, - or _; check that it was copied whole.' });
    const unknown = await post(listToolsRpc, { authorization: `Bearer agt_${'x'.repeat(43)}` });
    expect(unknown.status).toBe(401);
    expect(await unknown.json()).toEqual({ success: false, error: 'The API key is not recognised or its agent is archived.' });
  });

  test('the SDK client cannot connect with a bad key', async () => {
    const refused = await mcpClient(base, `agt_${'y'.repeat(43)}`).catch((error) => error);
    expect(refused.code).toBe(401);
    expect(refused.message).toContain('The API key is not recognised or its agent is archived.');
  });

  test('an archived agent is refused', async () => {
    const eve = await h.agent('eve');
    await h.db.sql`update agents set archived_at = now() where username = 'eve'`;
    const res = await post(listToolsRpc, { authorization: `Bearer ${eve.key}` });
    expect(res.status).toBe(401);
  });

  test('DELETE is 405: the server keeps no session; GET opens the stream of resource updates', async () => {
    const res = await fetch(`${base}/mcp`, { method: 'DELETE', headers: { authorization: `Bearer ${keys.alice}`, accept: 'text/event-stream' } });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('GET, POST');
    expect(await res.json()).toEqual({ success: false, error: 'This MCP server is stateless: send JSON-RPC messages with POST.' });
    // The SDK clients of this file each hold one already.
    const held = h.inboxSignal.streaming();
    const stream = await fetch(`${base}/mcp`, { headers: { authorization: `Bearer ${keys.alice}`, accept: 'text/event-stream' } });
    expect(stream.status).toBe(200);
    expect(h.inboxSignal.streaming()).toBe(held + 1);
    expect(stream.headers.get('content-type')).toBe('text/event-stream');
    // A comment at once, so that the head is not held back until the first update.
    const reader = stream.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toBe(': open\n\n');
    await reader.cancel();
    await eventually(async () => h.inboxSignal.streaming() === held, 5_000);
  });

  test('/mcp is not in the public OpenAPI document', async () => {
    const doc = (await (await fetch(`${base}/openapi/json`)).json()) as { paths: Record<string, unknown> };
    expect(Object.keys(doc.paths).some((p) => p.startsWith('/mcp'))).toBe(false);
  });
});

describe('tool list', () => {
  test('lists the fourteen tools with JSON schemas taken from the domain', async () => {
    const { tools } = await alice.client.listTools();
    expect(tools.map((t) => t.name)).toEqual([
      'check_inbox',
      'read_message',
      'acknowledge',
      'send_message',
      'list_threads',
      'open_thread',
      'get_thread',
      'add_participant',
      'request_close',
      'get_contact_policy',
      'find_agents',
      'message_status',
      'search_messages',
      'list_messages',
    ]);
    for (const tool of tools) {
      expect(tool.inputSchema.type).toBe('object');
      expect(tool.description!.length).toBeLessThan(200);
    }
    const send = tools.find((t) => t.name === 'send_message')!;
    expect(send.inputSchema.required).toEqual(['threadId', 'content']);
    expect(send.inputSchema.properties).toMatchObject({
      content: { type: 'string', minLength: 1, maxLength: 10000 },
      summary: { type: 'string', maxLength: 200 },
    });
    const open = tools.find((t) => t.name === 'open_thread')!;
    expect(open.inputSchema.properties).toMatchObject({ title: { maxLength: 200 }, goal: { maxLength: 2000 } });
    expect(JSON.stringify(tools)).not.toContain('examples');
    const inbox = tools.find((t) => t.name === 'check_inbox')!;
    // A wait the SDK's default 60 s request timeout outlives.
    expect(inbox.inputSchema.properties).toMatchObject({ wait: { type: 'number', minimum: 0, maximum: 50 } });
  });

  test('every tool has a title, true annotations and an output schema its results match', async () => {
    const { tools } = await alice.client.listTools();
    const hints = Object.fromEntries(tools.map((t) => [t.name, [t.title, t.annotations]]));
    const reads = { readOnlyHint: true, idempotentHint: true, destructiveHint: false, openWorldHint: false };
    const records = { readOnlyHint: false, idempotentHint: true, destructiveHint: false, openWorldHint: false };
    expect(hints).toEqual({
      check_inbox: ['Check inbox', { title: 'Check inbox', ...reads }],
      read_message: ['Read a message', { title: 'Read a message', ...records }],
      acknowledge: ['Acknowledge a message', { title: 'Acknowledge a message', ...records }],
      send_message: ['Send a message', { title: 'Send a message', readOnlyHint: false, idempotentHint: false, destructiveHint: false, openWorldHint: true }],
      list_threads: ['List threads', { title: 'List threads', ...reads }],
      open_thread: ['Open a thread', { title: 'Open a thread', readOnlyHint: false, idempotentHint: false, destructiveHint: false, openWorldHint: false }],
      get_thread: ['Get a thread', { title: 'Get a thread', ...reads }],
      add_participant: ['Add a participant', { title: 'Add a participant', ...records }],
      request_close: ['Request close', { title: 'Request close', ...records }],
      get_contact_policy: ['Your contact policy', { title: 'Your contact policy', ...reads }],
      find_agents: ['Find agents', { title: 'Find agents', ...reads }],
      message_status: ['Message status', { title: 'Message status', ...reads }],
      search_messages: ['Search messages', { title: 'Search messages', ...reads }],
      list_messages: ['List messages', { title: 'List messages', ...records }],
    });
    for (const tool of tools) expect([tool.name, tool.outputSchema?.type]).toEqual([tool.name, 'object']);
    // The SDK client checks every structured result against the tool's output schema, and throws
    // on a mismatch: these calls pass only if each result matches.
    const thread = await openThread();
    const sent = await alice.client.callTool({ name: 'send_message', arguments: { threadId: thread.id, content: 'structured' } });
    expect(sent.structuredContent).toMatchObject({ threadId: thread.id, recipients: 1 });
    expect(JSON.parse((sent.content as { text: string }[])[0]!.text)).toEqual(sent.structuredContent);
    const messageId = (sent.structuredContent as { id: string }).id;
    for (const [name, args] of [
      ['check_inbox', {}],
      ['read_message', { messageId }],
      ['list_threads', {}],
      ['get_thread', { threadId: thread.id }],
      ['list_messages', { threadId: thread.id }],
      ['add_participant', { threadId: thread.id, username: 'carol' }],
      ['acknowledge', { messageId }],
      ['request_close', { threadId: thread.id }],
      ['message_status', { messageId }],
      ['get_contact_policy', {}],
      ['search_messages', { q: 'structured' }],
      ['find_agents', { q: 'alice' }],
    ] as const) {
      const result = await (name === 'request_close' || name === 'message_status' ? alice : bob).client.callTool({ name, arguments: args });
      expect([name, result.isError ?? false, typeof result.structuredContent]).toEqual([name, false, 'object']);
    }
  });

  test('an unknown tool is an invalid-params error, not a tool result', async () => {
    for (const name of ['delete_everything', 'toString']) {
      const refused = await alice.client.callTool({ name, arguments: {} }).catch((error) => error);
      expect([refused.code, refused.message]).toEqual([-32602, `MCP error -32602: There is no tool named ${name}; tools/list names them all.`]);
    }
  });
});

describe('threads', () => {
  test('open_thread returns the thread; a missing or long title is the HTTP sentence', async () => {
    const { data } = await alice.call('open_thread', { title: 'Launch', participantUsernames: ['bob', 'alice'] });
    expect(data).toMatchObject({ title: 'Launch', goal: null, state: 'open', openedBy: 'alice' });
    expect(data.participants).toEqual([{ username: 'alice' }, { username: 'bob' }]);
    expect(await alice.call('open_thread', {})).toEqual({ error: 'title is required' });
    expect(await alice.call('open_thread', { title: 'x'.repeat(201) })).toEqual({
      error: 'title must be at most 200 characters',
    });
    expect(await alice.call('open_thread', { title: 'T', participantUsernames: ['nobody'] })).toEqual({
      error: 'participantUsernames names nobody, which is not an active agent',
    });
  });

  test('a refusal carries the HTTP status of the same refusal, in _meta, for programs to branch on', async () => {
    const thread = await openThread();
    const result = await carol.client.callTool({ name: 'get_thread', arguments: { threadId: thread.id } });
    expect(result).toMatchObject({
      isError: true,
      content: [{ type: 'text', text: 'No such thread, or you are not a participant.' }],
      _meta: { status: 404 },
    });
    expect(result.structuredContent).toBeUndefined();
    const invalid = await carol.client.callTool({ name: 'open_thread', arguments: {} });
    expect([invalid.isError, invalid.content, invalid._meta]).toEqual([true, [{ type: 'text', text: 'title is required' }], { status: 400 }]);
  });

  test('list_threads and get_thread; a stranger gets 404', async () => {
    const thread = await openThread();
    const listed = await bob.call('list_threads');
    expect(listed.data.threads.map((t: { id: string }) => t.id)).toContain(thread.id);
    expect((await carol.call('list_threads')).data.threads.map((t: { id: string }) => t.id)).not.toContain(thread.id);
    expect((await bob.call('get_thread', { threadId: thread.id })).data).toMatchObject({ id: thread.id, title: 'Plans' });
    expect(await carol.call('get_thread', { threadId: thread.id })).toEqual({
      error: 'No such thread, or you are not a participant.',
    });
    expect(await carol.call('get_thread', { threadId: 'not-an-id' })).toEqual({
      error: 'No such thread, or you are not a participant.',
    });
    expect(await carol.call('get_thread', {})).toEqual({ error: 'threadId is required' });
  });

  test('add_participant adds; an unknown username is 400; a stranger is 404', async () => {
    const thread = await openThread();
    const added = await bob.call('add_participant', { threadId: thread.id, username: 'dave' });
    expect(added.data.participants).toEqual([{ username: 'alice' }, { username: 'bob' }, { username: 'dave' }]);
    expect(await bob.call('add_participant', { threadId: thread.id, username: 'zed' })).toEqual({
      error: 'username names zed, which is not an active agent',
    });
    expect(await bob.call('add_participant', { threadId: thread.id })).toEqual({ error: 'username is required' });
    expect(await carol.call('add_participant', { threadId: thread.id, username: 'carol' })).toEqual({
      error: 'No such thread, or you are not a participant.',
    });
  });

  test('request_close: 403 for a non-opener, close-pending for the opener, then sending is 400', async () => {
    const thread = await openThread();
    expect(await bob.call('request_close', { threadId: thread.id })).toEqual({
      error: 'Only the agent that opened this thread may ask to close it.',
    });
    expect((await alice.call('request_close', { threadId: thread.id })).data).toMatchObject({ state: 'close-pending' });
    expect((await alice.call('request_close', { threadId: thread.id })).data).toMatchObject({ state: 'close-pending' });
    expect(await bob.call('send_message', { threadId: thread.id, content: 'one more thing' })).toEqual({
      error: 'The thread is closing: a close was requested and awaits a person, so sending is rejected.',
    });
    expect(await carol.call('request_close', { threadId: thread.id })).toEqual({
      error: 'No such thread, or you are not a participant.',
    });
  });
});

describe('messages', () => {
  test('send_message posts; summary required over 200 characters; a stranger gets 404', async () => {
    const thread = await openThread();
    const sent = await alice.call('send_message', { threadId: thread.id, content: 'Hello Bob' });
    expect(sent.data).toMatchObject({ threadId: thread.id, recipients: 1 });
    const [stored] = await h.db.sql`select content, sender from messages where id = ${sent.data.id}`;
    expect(stored).toEqual({ content: 'Hello Bob', sender: 'alice' });
    expect(await alice.call('send_message', { threadId: thread.id, content: 'x'.repeat(201) })).toEqual({
      error: 'summary is required when content is longer than 200 characters; add one and resend',
    });
    expect(await alice.call('send_message', { threadId: thread.id, content: '' })).toEqual({
      error: 'content must not be empty',
    });
    expect(await carol.call('send_message', { threadId: thread.id, content: 'hi' })).toEqual({
      error: 'No such thread, or you are not a participant.',
    });
    const [posted] = await h.db.sql<{ count: number }[]>`select count(*)::int from messages where thread_id = ${thread.id}`;
    expect(posted!.count).toBe(1);
  });

  test('check_inbox, read_message (records one read → fetched) and acknowledge', async () => {
    const thread = await openThread();
    const first = (await alice.call('send_message', { threadId: thread.id, content: 'First\nline two' })).data;
    const second = (await alice.call('send_message', { threadId: thread.id, content: 'Second', summary: 'Short' })).data;

    const inbox = (await bob.call('check_inbox')).data.entries.filter((e: { threadId: string }) => e.threadId === thread.id);
    expect(inbox.map((e: { messageId: string; summary: string; alreadyRead: boolean }) => [e.messageId, e.summary, e.alreadyRead])).toEqual([
      [first.id, 'First', false],
      [second.id, 'Short', false],
    ]);

    const read = await bob.call('read_message', { messageId: first.id });
    expect(read.data).toMatchObject({ id: first.id, threadId: thread.id, sender: 'alice', content: 'First\nline two', summary: null });
    expect(await deliveryOf(first.id, 'bob')).toMatchObject({ step: 'fetched' });
    expect(await deliveryOf(second.id, 'bob')).toMatchObject({ step: 'accepted', fetched_at: null });

    const after = (await bob.call('check_inbox')).data.entries.filter((e: { threadId: string }) => e.threadId === thread.id);
    expect(after.map((e: { alreadyRead: boolean }) => e.alreadyRead)).toEqual([true, false]);

    expect((await bob.call('acknowledge', { messageId: first.id })).data).toEqual({ message: 'Delivery acknowledged.' });
    expect((await bob.call('acknowledge', { messageId: first.id })).data).toEqual({ message: 'Delivery acknowledged.' });
    expect(await deliveryOf(first.id, 'bob')).toMatchObject({ step: 'fetched' });
    const left = (await bob.call('check_inbox')).data.entries.filter((e: { threadId: string }) => e.threadId === thread.id);
    expect(left.map((e: { messageId: string }) => e.messageId)).toEqual([second.id]);
  });

  test('read_message and acknowledge: 404 for a stranger, an unknown id and a bad id', async () => {
    const thread = await openThread();
    const sent = (await alice.call('send_message', { threadId: thread.id, content: 'private' })).data;
    expect(await carol.call('read_message', { messageId: sent.id })).toEqual({
      error: 'No such message, or you are not a participant of its thread.',
    });
    expect(await carol.call('acknowledge', { messageId: sent.id })).toEqual({ error: 'No such message delivered to you.' });
    expect(await bob.call('acknowledge', { messageId: 'nope' })).toEqual({ error: 'No such message delivered to you.' });
    expect(await bob.call('read_message', {})).toEqual({ error: 'messageId is required' });
    expect(await bob.call('read_message', { messageId: 7 })).toEqual({ error: 'messageId must be a string' });
    expect(await deliveryOf(sent.id, 'bob')).toMatchObject({ step: 'accepted', acknowledged_at: null });
  });

  test('list_messages returns bodies oldest first and records a read of each; a stranger gets 404', async () => {
    const thread = await openThread();
    const ids: string[] = [];
    for (const content of ['a', 'b', 'c']) ids.push((await alice.call('send_message', { threadId: thread.id, content })).data.id);
    const listed = await bob.call('list_messages', { threadId: thread.id, limit: 2 });
    expect(listed.data).toMatchObject({ omittedMessageIds: [] });
    expect(listed.data.messages.map((m: { content: string }) => m.content)).toEqual(['b', 'c']);
    expect((await deliveryOf(ids[0]!, 'bob')).step).toBe('accepted');
    expect((await deliveryOf(ids[2]!, 'bob')).step).toBe('fetched');
    const lenient = await bob.call('list_messages', { threadId: thread.id, limit: 'lots' });
    expect(lenient.data.messages).toHaveLength(3);
    expect(await carol.call('list_messages', { threadId: thread.id })).toEqual({
      error: 'No such thread, or you are not a participant.',
    });
  });
});

describe('text the database would not keep as given', () => {
  test('an unpaired surrogate in a title, goal, content or summary, or a NUL, is the HTTP sentence with status 400, and nothing is stored', async () => {
    const thread = await openThread();
    const [threadsBefore] = await h.db.sql`select count(*)::int as n from threads`;
    const unpaired = 'must not contain an unpaired surrogate (U+D800 to U+DFFF), which is not valid Unicode';
    for (const [tool, args, error] of [
      ['open_thread', { title: '\ud800' }, `title ${unpaired}`],
      ['open_thread', { title: 'ok', goal: 'a\udfffb' }, `goal ${unpaired}`],
      ['send_message', { threadId: thread.id, content: '\ud83d' }, `content ${unpaired}`],
      ['send_message', { threadId: thread.id, content: 'fine', summary: '\ude00' }, `summary ${unpaired}`],
      ['send_message', { threadId: thread.id, content: 'a\u0000b' }, 'content must not contain the NUL character (U+0000)'],
    ] as const) {
      const result = await alice.client.callTool({ name: tool, arguments: args });
      expect([tool, result.isError, result.content, result._meta]).toEqual([tool, true, [{ type: 'text', text: error }], { status: 400 }]);
    }
    const [threadsAfter] = await h.db.sql`select count(*)::int as n from threads`;
    expect(threadsAfter!.n).toBe(threadsBefore!.n);
    const [messages] = await h.db.sql`select count(*)::int as n from messages where thread_id = ${thread.id}`;
    expect(messages!.n).toBe(0);
  });
});

describe('lengths', () => {
  test('are counted in code points: every bound holds with emoji, two UTF-16 units each', async () => {
    const opened = await alice.call('open_thread', { title: EMOJI.repeat(200), goal: EMOJI.repeat(2000), participantUsernames: ['bob'] });
    expect(opened.data).toMatchObject({ title: EMOJI.repeat(200), goal: EMOJI.repeat(2000) });
    const threadId = opened.data.id as string;
    for (const args of POSTS_AT_BOUNDS) {
      const sent = await alice.call('send_message', { threadId, ...args });
      expect(sent.data).toMatchObject({ threadId, recipients: 1 });
    }
    const summaryRequired = 'summary is required when content is longer than 200 characters; add one and resend';
    for (const [tool, args, error] of [
      ['open_thread', { title: EMOJI.repeat(201) }, 'title must be at most 200 characters'],
      ['open_thread', { title: 'ok', goal: EMOJI.repeat(2001) }, 'goal must be at most 2000 characters'],
      ['send_message', { threadId, content: EMOJI.repeat(10_001), summary: 's' }, 'content must be at most 10000 characters'],
      ['send_message', { threadId, content: 'x', summary: EMOJI.repeat(201) }, 'summary must be at most 200 characters'],
      ['send_message', { threadId, content: EMOJI.repeat(201) }, summaryRequired],
    ] as const) {
      const result = await alice.client.callTool({ name: tool, arguments: args });
      expect([args, result.content, result._meta]).toEqual([args, [{ type: 'text', text: error }], { status: 400 }]);
    }
    const [messages] = await h.db.sql`select count(*)::int as n from messages where thread_id = ${threadId}`;
    expect(messages!.n).toBe(2);
  });
});

describe('read tracking across doors', () => {
  test('an MCP read shows as alreadyRead in the HTTP inbox, and an HTTP listing in check_inbox', async () => {
    const thread = await openThread();
    const viaMcp = (await alice.call('send_message', { threadId: thread.id, content: 'read me over MCP' })).data;
    await bob.call('read_message', { messageId: viaMcp.id });
    const http = await h.call('GET', '/api/deliveries', { key: keys.bob });
    expect(http.status).toBe(200);
    expect(http.body.data.find((e: { messageId: string }) => e.messageId === viaMcp.id)).toMatchObject({ alreadyRead: true });

    const viaHttp = (await alice.call('send_message', { threadId: thread.id, content: 'read me over HTTP' })).data;
    const before = (await bob.call('check_inbox')).data.entries.find((e: { messageId: string }) => e.messageId === viaHttp.id);
    expect(before).toMatchObject({ alreadyRead: false });
    const listing = await h.call('GET', `/api/threads/${thread.id}/messages`, { key: keys.bob });
    expect(listing.status).toBe(200);
    const after = (await bob.call('check_inbox')).data.entries.find((e: { messageId: string }) => e.messageId === viaHttp.id);
    expect(after).toMatchObject({ alreadyRead: true });
  });

  test('acknowledging over MCP removes the entry from the HTTP inbox', async () => {
    const thread = await openThread();
    const sent = (await alice.call('send_message', { threadId: thread.id, content: 'ack me' })).data;
    await bob.call('acknowledge', { messageId: sent.id });
    const http = await h.call('GET', '/api/deliveries?limit=200', { key: keys.bob });
    expect(http.body.data.some((e: { messageId: string }) => e.messageId === sent.id)).toBe(false);
  });
});
