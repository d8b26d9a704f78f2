import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createLogger } from '../src/log';
import { setContact } from '../src/domain/agents/contact-policy';
import { BY_CLI } from '../src/domain/people/audit';
import { uniqueName, useHarness, useListening, type TestAgent } from './support/harness';
import { mcpClient } from './support/mcp-client';
import { mcpClient2026 } from './support/mcp-client-2026';
import { eventually } from './support/receiver';

// MCP 2026-07-28 on /mcp beside 2025-11-25, through the SDK's v2 client over real HTTP: the same
// tools with the same results and refusals as the v1 client gets, server/discover, inbox updates
// on subscriptions/listen, and the version and trace context in the log and the metrics.
const TOKEN = 'metrics-token-for-mcp-2026-tests';
const lines: Record<string, unknown>[] = [];
const h = useHarness({ METRICS_TOKEN: TOKEN }, { log: createLogger('debug', (line) => lines.push(JSON.parse(line))) });
const server = useListening(h);
const SERVER_INFO = { name: 'agent-messaging-service', title: 'Agent Messaging Service', version: '1.0.0' };
// What the v2 SDK adds to every 2026-07-28 result's _meta: the server's identity, as that version asks.
const stamped = (meta: Record<string, unknown>) => ({ ...meta, 'io.modelcontextprotocol/serverInfo': SERVER_INFO });

type Client2026 = Awaited<ReturnType<typeof mcpClient2026>>;
let alice: TestAgent, bob: TestAgent;
let modern: Client2026, bobModern: Client2026;
let old: Awaited<ReturnType<typeof mcpClient>>;

beforeAll(async () => {
  alice = await h.agent(uniqueName('alice'));
  bob = await h.agent(uniqueName('bob'));
  modern = await mcpClient2026(server.base, alice.key);
  bobModern = await mcpClient2026(server.base, bob.key);
  old = await mcpClient(server.base, alice.key);
});

afterAll(async () => {
  await Promise.all([modern, bobModern, old].map((c) => c?.close()));
});

describe('discovery', () => {
  test('server/discover names 2026-07-28, the same capabilities, identity and instructions as initialize', async () => {
    const discovered = await modern.client.discover();
    expect(discovered).toEqual({
      supportedVersions: ['2026-07-28'],
      capabilities: { tools: {}, resources: { subscribe: true } },
      instructions: old.client.getInstructions()!,
      _meta: { 'io.modelcontextprotocol/serverInfo': SERVER_INFO },
      cacheScope: 'private',
      ttlMs: 0,
    });
    expect(modern.client.getServerCapabilities() as unknown).toEqual(old.client.getServerCapabilities());
  });

  test('the host picks: a v2 client set to negotiate gets 2026-07-28, one left at its default 2025-11-25', async () => {
    for (const [options, version] of [[{ versionNegotiation: { mode: 'auto' as const } }, '2026-07-28'], [{}, '2025-11-25']] as const) {
      const client = new Client({ name: 'ams-test', version: '2.0.0' }, options);
      await client.connect(new StreamableHTTPClientTransport(new URL('/mcp', server.base), { requestInit: { headers: { authorization: `Bearer ${alice.key}` } } }));
      try {
        expect(client.getNegotiatedProtocolVersion()).toBe(version);
        expect((await client.listTools()).tools).toHaveLength(14);
      } finally {
        await client.close();
      }
    }
  });

  test('the tool and resource lists are those 2025-11-25 clients get', async () => {
    const [tools2026, tools2025] = await Promise.all([modern.client.listTools(), old.client.listTools()]);
    expect(tools2026.tools as unknown).toEqual(tools2025.tools);
    expect(tools2026.tools).toHaveLength(14);
    expect((await modern.client.listResources()).resources).toEqual((await old.client.listResources()).resources);
  });
});

describe('every tool, as the v1 client gets it', () => {
  test('threads, messages, the inbox, receipts, search, the directory and the contact policy', async () => {
    const carol = await h.agent(uniqueName('carol'));
    const opened = await modern.call('open_thread', { title: 'Both versions', participantUsernames: [bob.username], idempotencyKey: 'open-1' });
    const threadId = opened.data.id;
    expect(opened.data).toMatchObject({ title: 'Both versions', state: 'open', openedBy: alice.username });
    expect((await modern.call('open_thread', { title: 'Both versions', participantUsernames: [bob.username], idempotencyKey: 'open-1' })).data).toEqual(opened.data);
    expect((await modern.call('get_thread', { threadId })).data).toEqual((await old.call('get_thread', { threadId })).data);
    expect((await modern.call('list_threads', { limit: 5 })).data).toEqual((await old.call('list_threads', { limit: 5 })).data);
    const added = await modern.call('add_participant', { threadId, username: carol.username });
    expect(added.data.participants.map((p: { username: string }) => p.username).sort()).toEqual([alice.username, bob.username, carol.username].sort());

    // A wait for mail answers as soon as the message arrives.
    const waiting = bobModern.call('check_inbox', { wait: 10 });
    await eventually(async () => h.inboxSignal.waiting() === 1, 5_000);
    const sent = await modern.call('send_message', { threadId, content: 'searchable pelican note', idempotencyKey: 'send-1' });
    expect(sent.data).toMatchObject({ threadId, recipients: 2 });
    expect((await waiting).data.entries.map((e: { messageId: string }) => e.messageId)).toEqual([sent.data.id]);

    const read = await bobModern.call('read_message', { messageId: sent.data.id });
    expect(read.data).toMatchObject({ id: sent.data.id, content: 'searchable pelican note', sender: alice.username });
    expect((await bobModern.call('acknowledge', { messageId: sent.data.id })).data).toEqual({ message: 'Delivery acknowledged.' });
    expect((await bobModern.call('check_inbox')).data).toEqual({ entries: [] });

    const status = await modern.call('message_status', { messageId: sent.data.id });
    expect(status.data).toEqual((await old.call('message_status', { messageId: sent.data.id })).data);
    expect(status.data.recipients.find((r: { username: string }) => r.username === bob.username).step).toBe('fetched');
    const listed = await modern.call('list_messages', { threadId });
    expect(listed.data.messages.map((m: { id: string }) => m.id)).toEqual([sent.data.id]);
    await eventually(async () => (await modern.call('search_messages', { q: 'pelican' })).data.results?.length === 1, 5_000);
    expect((await modern.call('search_messages', { q: 'pelican' })).data).toEqual((await old.call('search_messages', { q: 'pelican' })).data);
    expect((await modern.call('find_agents', { q: bob.username })).data).toEqual((await old.call('find_agents', { q: bob.username })).data);
    expect((await modern.call('get_contact_policy')).data).toEqual({ policy: 'open', allow: [], block: [] });
    expect((await modern.call('request_close', { threadId })).data).toMatchObject({ id: threadId, state: 'close-pending' });
  });
});

describe('refusals', () => {
  test('a refusal is the same sentence with the status, the code and the seconds in _meta', async () => {
    const stranger = await h.agent(uniqueName('stranger'));
    const threadId = await h.thread(alice, [bob]);
    const strangerClient = await mcpClient2026(server.base, stranger.key);
    try {
      const refused = await strangerClient.call('get_thread', { threadId });
      expect(refused).toEqual({ error: 'No such thread, or you are not a participant.', meta: stamped({ status: 404 }) });
      expect(await strangerClient.call('open_thread', {})).toEqual({ error: 'title is required', meta: stamped({ status: 400 }) });
      await setContact(h.db.sql, BY_CLI, bob.username, stranger.username, 'block');
      const blocked = await strangerClient.call('open_thread', { title: 'Hi', participantUsernames: [bob.username] });
      expect(blocked.meta).toEqual(stamped({ status: 403, code: 'blocked' }));
      const own = await h.thread(stranger, [alice]);
      await h.db.sql`update agents set messages_per_minute = 1 where username = ${stranger.username}`;
      expect(await strangerClient.call('send_message', { threadId: own, content: 'one' })).toMatchObject({ data: { threadId: own } });
      const quota = await strangerClient.call('send_message', { threadId: own, content: 'two' });
      expect(quota.meta).toEqual(stamped({ status: 429, code: 'quota_exceeded', retryAfter: expect.any(Number) }));
    } finally {
      await strangerClient.close();
    }
  });

  test('an unknown tool and malformed arguments are JSON-RPC errors with the 2025-11-25 sentences', async () => {
    const unknown = await modern.client.callTool({ name: 'delete_everything', arguments: {} }).catch((error) => error);
    expect([unknown.code, unknown.message]).toEqual([-32602, 'There is no tool named delete_everything; tools/list names them all.']);
    const res = await fetch(`${server.base}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${alice.key}`, 'mcp-protocol-version': '2026-07-28' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'check_inbox', arguments: [], _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28' } } }),
    });
    expect(await res.json()).toEqual({ jsonrpc: '2.0', id: 3, error: { code: -32602, message: "Invalid params: params.arguments must be an object of check_inbox's arguments." } });
  });
});

describe('malformed 2026-07-28 requests', () => {
  const ENVELOPE = {
    'io.modelcontextprotocol/protocolVersion': '2026-07-28',
    'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
    'io.modelcontextprotocol/clientCapabilities': {},
  };
  const raw = async (body: unknown, method: string, version = '2026-07-28') => {
    const res = await fetch(`${server.base}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${alice.key}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': version,
        'mcp-method': method,
      },
      body: JSON.stringify(body),
    });
    const answer = (await res.json()) as { error?: { code: number } };
    return [res.status, answer.error?.code];
  };

  test('are refused by the v2 SDK in JSON-RPC with a 4xx, never a 5xx, and hold nothing', async () => {
    const held = h.inboxSignal.streaming();
    const { 'io.modelcontextprotocol/clientCapabilities': _, ...withoutCapabilities } = ENVELOPE;
    expect(await raw({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: withoutCapabilities } }, 'tools/list')).toEqual([400, -32602]);
    expect(await raw([{ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: ENVELOPE } }], 'tools/list')).toEqual([400, -32600]);
    expect(await raw({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: { ...ENVELOPE, 'io.modelcontextprotocol/protocolVersion': '2027-01-01' } } }, 'tools/list', '2027-01-01')).toEqual([400, -32022]);
    expect(await raw({ jsonrpc: '2.0', id: 1, method: 'ping', params: { _meta: ENVELOPE } }, 'ping')).toEqual([404, -32601]);
    // A listen request without its filter is answered at once and opens no stream.
    expect(await raw({ jsonrpc: '2.0', id: 1, method: 'subscriptions/listen', params: { _meta: ENVELOPE } }, 'subscriptions/listen')).toEqual([200, -32602]);
    expect(h.inboxSignal.streaming()).toBe(held);
  });
});

describe('subscriptions/listen', () => {
  async function listener(agent: TestAgent, key = agent.key) {
    const client = await mcpClient2026(server.base, key);
    const updates: unknown[] = [];
    client.client.setNotificationHandler('notifications/resources/updated', (notification) => void updates.push(notification));
    const subscription = await client.client.listen({ resourceSubscriptions: ['ams://inbox'] });
    return { client, updates, subscription };
  }

  test('hears notifications/resources/updated when mail arrives for the agent, and nothing for its own post', async () => {
    const reader = await h.agent(uniqueName('listener'));
    const threadId = await h.thread(alice, [reader]);
    const before = h.inboxSignal.streaming();
    const { client, updates, subscription } = await listener(reader);
    expect(subscription.honoredFilter).toEqual({ resourceSubscriptions: ['ams://inbox'] });
    await eventually(async () => h.inboxSignal.streaming() === before + 1, 5_000);
    await h.post(alice, threadId, 'you have mail');
    await eventually(async () => updates.length === 1, 5_000);
    expect(updates[0]).toEqual({
      method: 'notifications/resources/updated',
      params: { uri: 'ams://inbox', _meta: { 'io.modelcontextprotocol/subscriptionId': expect.anything() } },
    });
    await h.post(reader, threadId, 'not mail for me');
    await Bun.sleep(200);
    expect(updates).toHaveLength(1);
    await subscription.close();
    expect(await subscription.closed).toBe('local');
    await eventually(async () => h.inboxSignal.streaming() === before, 5_000);
    await client.close();
  });

  test('ends, gracefully, when the key it was opened with is revoked, and at the key’s expiry', async () => {
    const reader = await h.agent(uniqueName('revoked'));
    const spare = (await h.call('POST', '/api/agents/me/keys', { key: reader.key, body: { name: 'spare' } })).body.data;
    const { subscription } = await listener(reader, spare.apiKey);
    expect((await h.call('DELETE', `/api/agents/me/keys/${spare.id}`, { key: reader.key })).status).toBe(200);
    expect(await subscription.closed).toBe('graceful');

    const brief = (await h.call('POST', '/api/agents/me/keys', { key: reader.key, body: { name: 'brief', expiresAt: new Date(Date.now() + 1_500).toISOString() } })).body.data;
    const expiring = await listener(reader, brief.apiKey);
    expect(await expiring.subscription.closed).toBe('graceful');
  });
});

describe('the version and the trace in the log and the metrics', () => {
  test('each request is logged at debug with its version, and a traceparent from _meta or the header names the trace', async () => {
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    await modern.call('get_contact_policy', {}, { traceparent: `00-${traceId}-00f067aa0ba902b7-01` });
    expect(lines.findLast((l) => l.event === 'mcp_request' && l.tool === 'get_contact_policy')).toEqual({
      time: expect.any(String),
      level: 'debug',
      event: 'mcp_request',
      requestId: expect.any(String),
      traceId,
      parentSpanId: '00f067aa0ba902b7',
      protocolVersion: '2026-07-28',
      method: 'tools/call',
      tool: 'get_contact_policy',
      agent: alice.username,
    });
    const headerTrace = '0af7651916cd43dd8448eb211c80319c';
    const traced = await mcpClient(server.base, alice.key, { traceparent: `00-${headerTrace}-b7ad6b7169203331-01` });
    try {
      await traced.call('check_inbox');
      expect(lines.findLast((l) => l.event === 'mcp_request' && l.tool === 'check_inbox')).toMatchObject({
        traceId: headerTrace,
        parentSpanId: 'b7ad6b7169203331',
        protocolVersion: '2025-11-25',
      });
    } finally {
      await traced.close();
    }
    // A malformed traceparent is ignored.
    await modern.call('get_contact_policy', {}, { traceparent: '00-nope-01' });
    expect(lines.findLast((l) => l.event === 'mcp_request' && l.tool === 'get_contact_policy')).not.toHaveProperty('traceId');
  });

  test('ams_mcp_requests_total counts requests by protocol version and method', async () => {
    const res = await h.call('GET', '/metrics', { key: TOKEN });
    const count = (version: string, method: string) =>
      Number(String(res.body).match(new RegExp(`^ams_mcp_requests_total\\{protocol_version="${version}",method="${method.replace('/', '\\/')}"\\} (\\d+)$`, 'm'))?.[1] ?? 0);
    expect(count('2026-07-28', 'server/discover')).toBeGreaterThanOrEqual(2);
    expect(count('2026-07-28', 'tools/call')).toBeGreaterThanOrEqual(20);
    expect(count('2026-07-28', 'subscriptions/listen')).toBeGreaterThanOrEqual(3);
    expect(count('2025-11-25', 'initialize')).toBeGreaterThanOrEqual(2);
    expect(count('2025-11-25', 'tools/call')).toBeGreaterThanOrEqual(6);
  });
});
