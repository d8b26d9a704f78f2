import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { DEFAULT_REQUEST_TIMEOUT_MSEC } from '@modelcontextprotocol/sdk/shared/protocol.js';
import { loadConfig } from '../src/config';
import { connect } from '../src/db/connect';
import { LIMITS } from '../src/domain/shared/schemas';
import { buildApp } from '../src/app';
import { createLogger, silentLogger } from '../src/log';
import { callApp, uniqueName, useHarness, type TestAgent } from './support/harness';
import { mcpClient } from './support/mcp-client';
import { NO_OAUTH } from '../src/mcp/routes';

// The MCP transport as the specification (2025-11-25) and hosts expect it, over raw HTTP where the
// point is the wire, and with the SDK's own client where the point is what a host sees.
const h = useHarness();
let agent: TestAgent;
let base: string;

beforeAll(async () => {
  agent = await h.agent(uniqueName('mcp'));
  h.app.listen({ port: 0, hostname: '127.0.0.1' });
  base = `http://127.0.0.1:${h.app.server!.port}`;
});
afterAll(() => h.app.stop(true));

const ACCEPT = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
const listTools = { jsonrpc: '2.0', id: 7, method: 'tools/list' };
const rpc = (body: unknown, headers: Record<string, string> = {}, app = h.app) =>
  callApp(app, 'POST', '/mcp', { headers: { ...ACCEPT, authorization: `Bearer ${agent.key}`, ...headers }, raw: typeof body === 'string' ? body : JSON.stringify(body) });

describe('DNS-rebinding protection', () => {
  const foreign = 'This MCP server does not take requests from pages at http://evil.example.com (DNS-rebinding protection); an operator can allow an origin with MCP_ALLOWED_ORIGINS.';

  test('a foreign Origin is 403 before anything else, with or without a key', async () => {
    for (const headers of [{ origin: 'http://evil.example.com' }, { origin: 'http://evil.example.com', authorization: '' }] as Record<string, string>[]) {
      const res = await rpc(listTools, headers);
      expect([res.status, res.body]).toEqual([403, { success: false, error: foreign }]);
    }
    const nullOrigin = await rpc(listTools, { origin: 'null' });
    expect(nullOrigin.status).toBe(403);
  });

  test('programs (no Origin), loopback pages, PUBLIC_URL and MCP_ALLOWED_ORIGINS pass', async () => {
    expect((await rpc(listTools)).status).toBe(200);
    for (const origin of ['http://localhost:5173', 'http://127.0.0.1:3000', 'https://[::1]:8443']) {
      expect([origin, (await rpc(listTools, { origin })).status]).toEqual([origin, 200]);
    }
    const config = loadConfig({
      DATABASE_URL: h.db.url,
      PUBLIC_URL: 'https://ams.example.org/',
      MCP_ALLOWED_ORIGINS: 'https://agents.example.com, http://tools.example.net:8080',
    });
    const app = buildApp({ sql: h.db.sql, config, log: silentLogger, inboxSignal: h.inboxSignal, agentCache: h.agentCache });
    for (const origin of ['https://ams.example.org', 'https://agents.example.com', 'http://tools.example.net:8080']) {
      expect([origin, (await rpc(listTools, { origin }, app)).status]).toEqual([origin, 200]);
    }
    expect((await rpc(listTools, { origin: 'https://agents.example.com.evil.test' }, app)).status).toBe(403);
    expect((await rpc(listTools, { origin: 'http://agents.example.com' }, app)).status).toBe(403);
  });

  test('bound to loopback, a foreign Host is 403 too', async () => {
    const config = loadConfig({ DATABASE_URL: h.db.url, HOST: '127.0.0.1' });
    const app = buildApp({ sql: h.db.sql, config, log: silentLogger, inboxSignal: h.inboxSignal, agentCache: h.agentCache });
    const refused = await rpc(listTools, { host: 'evil.example.com:3000' }, app);
    expect([refused.status, refused.body]).toEqual([
      403,
      { success: false, error: 'This MCP server listens on loopback only and does not answer for the host evil.example.com:3000 (DNS-rebinding protection).' },
    ]);
    for (const host of ['localhost:3000', '127.0.0.1:3000', '[::1]:3000']) expect([host, (await rpc(listTools, { host }, app)).status]).toEqual([host, 200]);
    // Bound to every interface (the default), the Host is not judged: a proxy names it.
    expect((await rpc(listTools, { host: 'ams.example.org' })).status).toBe(200);
  });

  test('a bad MCP_ALLOWED_ORIGINS stops the start with a sentence', () => {
    expect(() => loadConfig({ MCP_ALLOWED_ORIGINS: 'agents.example.com' })).toThrow(
      'MCP_ALLOWED_ORIGINS must be a comma-separated list of origins such as https://agents.example.com.',
    );
  });
});

describe('401 with a bearer challenge', () => {
  test('RFC 6750: the scheme always, and invalid_token when a key was sent', async () => {
    const none = await rpc(listTools, { authorization: '' });
    expect([none.status, none.headers.get('www-authenticate')]).toEqual([401, 'Bearer realm="agent-messaging-service"']);
    const wrong = await rpc(listTools, { authorization: `Bearer agt_${'z'.repeat(43)}` });
    expect([wrong.status, wrong.headers.get('www-authenticate'), wrong.body]).toEqual([
      401,
      'Bearer realm="agent-messaging-service", error="invalid_token"',
      { success: false, error: 'The API key is not recognised or its agent is archived.' },
    ]);
    const api = await h.call('GET', '/api/threads', { key: 'sk_not_ours' });
    expect(api.headers.get('www-authenticate')).toBe('Bearer realm="agent-messaging-service", error="invalid_token"');
  });

  test('OAuth registration, which mcp-remote tries after any 401, says what to send instead', async () => {
    const res = await callApp(h.app, 'POST', '/register', { body: { client_name: 'mcp-remote', redirect_uris: ['http://localhost:1/cb'] } });
    expect([res.status, res.body]).toEqual([404, { success: false, error: NO_OAUTH }]);
    expect(NO_OAUTH).toContain('Authorization: Bearer agt_');
  });

  test('the SDK client shows our sentence', async () => {
    const refused = await mcpClient(base, `agt_${'q'.repeat(43)}`).catch((error) => error);
    expect(refused.code).toBe(401);
    expect(refused.message).toContain('The API key is not recognised or its agent is archived.');
  });
});

describe('JSON-RPC errors where JSON-RPC expects them', () => {
  test('a body that is not JSON is -32700, once the key has passed', async () => {
    const res = await rpc('{"jsonrpc": "2.0", "id": 1, "method": ');
    expect([res.status, res.body]).toEqual([400, { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error: the request body is not valid JSON.' } }]);
    const noKey = await rpc('{not json', { authorization: '' });
    expect(noKey.status).toBe(401);
  });

  test('tools/call params that are not a tool name and an object of arguments are -32602 in a sentence', async () => {
    for (const [params, sentence] of [
      [undefined, 'params must be an object with the tool name and its arguments.'],
      [{ name: 5 }, 'params.name must be the name of a tool, as a string.'],
      [{ name: 'check_inbox', arguments: 'all of it' }, "params.arguments must be an object of check_inbox's arguments."],
      [{ name: 'check_inbox', arguments: [1] }, "params.arguments must be an object of check_inbox's arguments."],
    ] as const) {
      const res = await rpc({ jsonrpc: '2.0', id: 3, method: 'tools/call', params });
      expect([res.status, res.body]).toEqual([200, { jsonrpc: '2.0', id: 3, error: { code: -32602, message: `Invalid params: ${sentence}` } }]);
    }
  });

  test('an unknown tool is -32602 with a sentence, even one named like an object property', async () => {
    for (const name of ['delete_everything', '__proto__', 'constructor']) {
      const res = await rpc({ jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name, arguments: {} } });
      expect(res.body).toEqual({ jsonrpc: '2.0', id: 4, error: { code: -32602, message: `There is no tool named ${name}; tools/list names them all.` } });
    }
  });

  test('arguments that break a rule stay a tool result the model can read (2025-11-25)', async () => {
    const res = await rpc({ jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'open_thread', arguments: { title: '' } } });
    expect(res.body).toEqual({
      jsonrpc: '2.0',
      id: 5,
      result: { content: [{ type: 'text', text: 'title must not be empty' }], isError: true, _meta: { status: 400 } },
    });
  });
});

describe('the longest wait with a default client', () => {
  // The official SDKs give up on a request after 60 s; the tool advertises and accepts waits that
  // end, and answer, well inside that.
  test('the tool caps wait below the default request timeout, with room for the answer', async () => {
    expect(DEFAULT_REQUEST_TIMEOUT_MSEC).toBe(60_000);
    expect(LIMITS.toolInboxWaitSeconds * 1000 + 10_000).toBeLessThanOrEqual(DEFAULT_REQUEST_TIMEOUT_MSEC);
    const client = await mcpClient(base, agent.key);
    const { tools } = await client.client.listTools();
    expect(tools.find((t) => t.name === 'check_inbox')!.inputSchema.properties!.wait).toMatchObject({ maximum: LIMITS.toolInboxWaitSeconds });
    expect(await client.call('check_inbox', { wait: LIMITS.toolInboxWaitSeconds + 1 })).toEqual({ error: 'wait must be a number of seconds from 0 to 50' });
    await client.close();
  });
});

describe('a result hosts accept', () => {
  test('list_messages returns the newest messages within its budget, names the rest, and records reads only of those returned', async () => {
    const sender = await h.agent(uniqueName('long'));
    const reader = await h.agent(uniqueName('reader'));
    const threadId = await h.thread(sender, [reader]);
    const ids: string[] = [];
    for (let i = 0; i < 8; i++) {
      const res = await h.call('POST', `/api/threads/${threadId}/messages`, { key: sender.key, body: { content: String(i).repeat(10_000), summary: `part ${i}` } });
      ids.push(res.body.data.id);
    }
    const client = await mcpClient(base, reader.key);
    const { data } = await client.call('list_messages', { threadId, limit: 8 });
    await client.close();
    // 10 006 characters each: five fit in 60 000, a sixth would not.
    expect(data.messages.map((m: { id: string }) => m.id)).toEqual(ids.slice(3));
    expect(data.omittedMessageIds).toEqual(ids.slice(0, 3).reverse());
    expect(data.note).toBe(
      '3 older messages were left out to keep this result under 60000 characters; they are not marked read. Read each with read_message, or ask for a smaller limit.',
    );
    const steps = await h.db.sql`select d.message_id, d.step from deliveries d where d.recipient_id = (select id from agents where username = ${reader.username}) order by d.message_id`;
    expect(steps.map((s) => s.step)).toEqual(['accepted', 'accepted', 'accepted', 'fetched', 'fetched', 'fetched', 'fetched', 'fetched']);
    // The HTTP listing keeps the contract: the whole page.
    const http = await h.call('GET', `/api/threads/${threadId}/messages?limit=8`, { key: reader.key });
    expect(http.body.data).toHaveLength(8);
  });
});

test('a database outage during a tool call is logged as the HTTP door logs it, with the request id', async () => {
  const lines: Record<string, unknown>[] = [];
  // The caller's key is already known to the agent cache, so only the tool's own query meets the outage.
  expect((await h.call('GET', '/api/threads', { key: agent.key })).status).toBe(200);
  const gone = connect(h.db.url, 1);
  await gone.end();
  const log = createLogger('info', (line) => lines.push(JSON.parse(line)));
  const app = buildApp({ sql: gone, config: h.config, log, inboxSignal: h.inboxSignal, agentCache: h.agentCache });
  const res = await rpc({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'list_threads', arguments: {} } }, {}, app);
  expect(res.body.result).toEqual({
    content: [{ type: 'text', text: 'The database is unavailable right now; try again in a moment.' }],
    isError: true,
    _meta: { status: 503 },
  });
  expect(lines.map(({ time: _, error: __, ...line }) => line)).toEqual([
    { level: 'warn', event: 'database_unavailable', door: 'mcp', tool: 'list_threads', requestId: res.headers.get('x-request-id') },
  ]);
});
