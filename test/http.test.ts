import { describe, expect, test } from 'bun:test';
import { loadConfig } from '../src/config';
import { cacheAgents } from '../src/db/agent-cache';
import { connect } from '../src/db/connect';
import { buildApp } from '../src/app';
import { createLogger, silentLogger } from '../src/log';
import { uniqueName, useHarness } from './support/harness';

const h = useHarness({ BODY_LIMIT_BYTES: '2048' });

describe('the envelope everywhere', () => {
  test('unknown routes are 404 in the envelope', async () => {
    for (const [method, path] of [['GET', '/nope'], ['POST', '/api/nope'], ['DELETE', '/api/threads']] as const) {
      const res = await h.call(method, path);
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ success: false, error: `No route for ${method} ${path}.` });
    }
  });

  test('malformed JSON is 400', async () => {
    const a = await h.agent(uniqueName('json'));
    const res = await h.call('POST', '/api/threads', { key: a.key, raw: '{"title": ', headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ success: false, error: 'The request body is not valid JSON.' });
  });

  test('JSON is read whatever the content type says', async () => {
    const a = await h.agent(uniqueName('form'));
    const res = await h.call('POST', '/api/threads', {
      key: a.key,
      raw: '{"title":"From curl -d"}',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(res.status).toBe(201);
  });

  test('a body over the limit is refused before it is read', async () => {
    const a = await h.agent(uniqueName('big'));
    const res = await h.call('POST', '/api/threads', { key: a.key, body: { title: 'x', goal: 'g'.repeat(3000) } });
    expect(res.status).toBe(413);
    expect(res.body).toEqual({ success: false, error: 'The request body is larger than the limit of 2048 bytes.' });
  });

  // A database without our tables: every query fails the way a bug would.
  test('a server fault is 500 in the envelope, logged with its stack, never shown', async () => {
    const lines: string[] = [];
    const elsewhere = new URL(h.db.url);
    elsewhere.pathname = '/postgres';
    const sql = connect(elsewhere.toString(), 1);
    const log = createLogger('info', (l) => lines.push(l));
    const app = buildApp({ sql, config: loadConfig({}), log, inboxSignal: h.inboxSignal, agentCache: cacheAgents(sql, log) });
    const a = await h.agent(uniqueName('fault'));
    const res = await app.handle(new Request('http://localhost/api/threads', { headers: { authorization: `Bearer ${a.key}` } }));
    await sql.end();
    expect(res.status).toBe(500);
    const id = res.headers.get('x-request-id')!;
    expect(await res.json()).toEqual({ success: false, error: `Internal server error (request id ${id}); nothing about the request will fix it.` });
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: 'error', event: 'request_failed', method: 'GET', path: '/api/threads', requestId: id });
    expect(JSON.parse(lines[0]!).error).toContain('relation "agent_keys" does not exist');
    expect(lines[0]).not.toContain(a.key);
  });

  test('an unreachable database is 503 in the envelope, even while authenticating', async () => {
    const lines: string[] = [];
    const sql = connect(h.db.url, 1);
    await sql.end();
    const log = createLogger('info', (l) => lines.push(l));
    const app = buildApp({ sql, config: loadConfig({}), log, inboxSignal: h.inboxSignal, agentCache: cacheAgents(sql, log) });
    const a = await h.agent(uniqueName('outage'));
    const ids: (string | null)[] = [];
    for (const [method, path] of [['GET', '/api/threads'], ['POST', '/api/threads'], ['GET', '/health']] as const) {
      const res = await app.handle(new Request(`http://localhost${path}`, { method, headers: { authorization: `Bearer ${a.key}` } }));
      expect(res.status).toBe(503);
      expect(await res.json()).toEqual({ success: false, error: 'The database is unavailable right now; try again in a moment.' });
      ids.push(res.headers.get('x-request-id'));
    }
    const logged = lines.map((l) => JSON.parse(l));
    expect(logged.map((l) => [l.event, l.requestId])).toEqual([
      ['database_unavailable', ids[0]],
      ['database_unavailable', ids[1]],
    ]);
  });

  // A database that accepts the connection and then says nothing (one shutting down, or a full
  // listen backlog) must not hold requests longer than the connect timeout.
  test('a connection attempt that hangs ends in 503 after the connect timeout', async () => {
    const silent = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } });
    const sql = connect(`postgres://nobody@127.0.0.1:${silent.port}/ams`, 1, 1);
    const log = createLogger('error', () => {});
    const app = buildApp({ sql, config: loadConfig({}), log, inboxSignal: h.inboxSignal, agentCache: cacheAgents(sql, log) });
    const started = performance.now();
    const res = await app.handle(new Request('http://localhost/health'));
    const waited = performance.now() - started;
    await sql.end({ timeout: 0 });
    silent.stop(true);
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ success: false, error: 'The database is unavailable right now; try again in a moment.' });
    expect(waited).toBeGreaterThan(900);
    expect(waited).toBeLessThan(5_000);
  });

  test('health answers 200 while the database is up', async () => {
    const res = await h.call('GET', '/health');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true, data: { status: 'ok' } });
  });
});

describe('OpenAPI', () => {
  test('documents every agent route with the bearer scheme and the error envelope', async () => {
    const res = await h.call('GET', '/openapi/json');
    expect(res.status).toBe(200);
    const doc = res.body;
    expect(doc.openapi).toMatch(/^3\.1/);
    expect(doc.components.securitySchemes.agentKey).toMatchObject({ type: 'http', scheme: 'bearer' });
    const operations = Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(([path, ops]) =>
      Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`),
    );
    expect(operations.sort()).toEqual(
      [
        'GET /api/deliveries',
        'POST /api/deliveries/{deliveryId}/delivered',
        'POST /api/deliveries/{deliveryId}/acknowledge',
        'GET /api/threads',
        'POST /api/threads',
        'GET /api/threads/{threadId}',
        'POST /api/threads/{threadId}/participants',
        'POST /api/threads/{threadId}/close',
        'GET /api/threads/{threadId}/messages',
        'POST /api/threads/{threadId}/messages',
        'GET /api/messages/{messageId}/deliveries',
        'GET /api/messages/search',
        'GET /api/events',
        'POST /api/files',
        'GET /api/files/{fileId}',
        'GET /api/files/{fileId}/content',
        'GET /api/agents/me/contact-policy',
        'GET /api/agents/me/keys',
        'POST /api/agents/me/keys',
        'DELETE /api/agents/me/keys/{keyId}',
        'GET /api/agents',
        'GET /api/agents/me/profile',
        'PUT /api/agents/me/profile',
      ].sort(),
    );
    expect(doc.security).toEqual([{ agentKey: [] }]);
    expect(doc.servers).toEqual([{ url: '/', description: 'The server that serves this document' }]);
    expect(doc.info.license).toEqual({ name: 'MIT', identifier: 'MIT' });
    const post = doc.paths['/api/threads/{threadId}/messages'].post;
    expect(post.operationId).toBe('postMessage');
    expect(post.security).toEqual([{ agentKey: [] }]);
    expect(Object.keys(post.responses).sort()).toEqual(['201', '202', '400', '401', '404', '413', '429', '500', '503']);
    expect(post.responses['201'].content['application/json'].schema.properties.data).toEqual({ $ref: '#/components/schemas/PostedMessage' });
    expect(post.responses['400'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/Error' });
    expect(post.responses['400'].content['application/json'].examples.contentTooLong).toEqual({
      value: { success: false, error: 'content must be at most 10000 characters' },
    });
    expect(post.responses['404'].content['application/json'].examples).toEqual({
      noSuchThread: { value: { success: false, error: 'No such thread, or you are not a participant.' } },
    });
    const failure = doc.components.schemas.Error;
    expect(failure.properties.success.const).toBe(false);
    expect(failure.required).toEqual(['success', 'error']);
    expect(Object.keys(doc.components.schemas).sort()).toEqual(
      [
        'Acknowledgement',
        'AgentKey',
        'AgentProfile',
        'AgentProfileInput',
        'ContactPolicy',
        'CreatedAgentKey',
        'DeliveredReport',
        'DirectoryEntry',
        'DirectoryPage',
        'Presence',
        'Error',
        'File',
        'Hold',
        'HoldStatus',
        'InboxEntry',
        'Message',
        'MessageCreatedEvent',
        'MessageReceipts',
        'MessageSearchHit',
        'MessageSearchResults',
        'NewAgentKey',
        'NewMessage',
        'NewParticipant',
        'NewThread',
        'Participant',
        'PostedMessage',
        'RecipientStatus',
        'Thread',
      ].sort(),
    );
    expect(post.requestBody.content['application/json'].schema).toEqual({ $ref: '#/components/schemas/NewMessage' });
    const body = doc.components.schemas.NewMessage;
    expect(body.properties.content).toMatchObject({ minLength: 1, maxLength: 10000 });
    expect(body.properties.summary).toMatchObject({ maxLength: 200 });
    const inbox = doc.paths['/api/deliveries'].get.parameters.map((p: { name?: string; schema?: { type: string }; $ref?: string }) =>
      p.$ref ?? [p.name, p.schema!.type],
    );
    expect(inbox).toEqual([['limit', 'integer'], ['after', 'string'], ['wait', 'number'], '#/components/parameters/RequestId']);
    expect(post.responses['201'].headers).toEqual({ 'X-Request-Id': { $ref: '#/components/headers/RequestId' } });
  });

  test('the document names this deployment as its server when PUBLIC_URL is set', async () => {
    const config = loadConfig({ DATABASE_URL: h.db.url, PUBLIC_URL: 'https://ams.example.org/' });
    const app = buildApp({ sql: h.db.sql, config, log: silentLogger, inboxSignal: h.inboxSignal, agentCache: h.agentCache });
    const doc: any = await (await app.handle(new Request('http://localhost/openapi/json'))).json();
    expect(doc.servers).toEqual([{ url: 'https://ams.example.org', description: 'This deployment' }]);
    expect(doc.info.contact).toEqual({ name: 'The operators of this deployment', url: 'https://ams.example.org/dashboard' });
  });

  test('serves an HTML page whose meta description is escaped', async () => {
    const res = await h.app.handle(new Request('http://localhost/openapi'));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/html');
    const html = await res.text();
    const description = html.match(/<meta name="description" content="([^"]*)">/)?.[1];
    expect(description).toStartWith('Agents exchange messages in threads. Every response uses the envelope `{ &#34;success&#34;: true');
  });
});

describe('text the database cannot store', () => {
  test('a NUL character is a 400 naming the field, and nothing is written', async () => {
    const a = await h.agent(uniqueName('nul'));
    const b = await h.agent(uniqueName('nul'));
    const id = await h.thread(a, [b]);
    for (const [path, body, error] of [
      [`/api/threads/${id}/messages`, { content: 'a\u0000b' }, 'content must not contain the NUL character (U+0000)'],
      ['/api/threads', { title: 'x\u0000' }, 'title must not contain the NUL character (U+0000)'],
      ['/api/threads', { title: 'ok', participantUsernames: ['\u0000'] }, 'participantUsernames.0 must not contain the NUL character (U+0000)'],
      [`/api/threads/${id}/participants`, { username: 'b\u0000' }, 'username must not contain the NUL character (U+0000)'],
    ] as const) {
      const res = await h.call('POST', path, { key: a.key, body });
      expect([path, res.status, res.body]).toEqual([path, 400, { success: false, error }]);
    }
    const [count] = await h.db.sql`select count(*)::int as n from messages where thread_id = ${id}`;
    expect(count!.n).toBe(0);
  });

  // JSON's \ud800 escape parses into a string holding half a character. UTF-8 has no form for it,
  // so it used to be stored as U+FFFD and answered 201.
  test('an unpaired surrogate is a 400 naming the field, and nothing is written', async () => {
    const a = await h.agent(uniqueName('half'));
    const b = await h.agent(uniqueName('half'));
    const id = await h.thread(a, [b], 'Before the surrogates');
    const unpaired = 'must not contain an unpaired surrogate (U+D800 to U+DFFF), which is not valid Unicode';
    for (const [path, raw, error] of [
      ['/api/threads', '{"title":"\\ud800"}', `title ${unpaired}`],
      ['/api/threads', '{"title":"ok","goal":"a\\udfffb"}', `goal ${unpaired}`],
      ['/api/threads', '{"title":"ok","participantUsernames":["\\ud83d"]}', `participantUsernames.0 ${unpaired}`],
      [`/api/threads/${id}/messages`, '{"content":"\\ud83d"}', `content ${unpaired}`],
      [`/api/threads/${id}/messages`, '{"content":"fine","summary":"\\ude00 backwards \\ud83d"}', `summary ${unpaired}`],
      [`/api/threads/${id}/participants`, '{"username":"\\udc00"}', `username ${unpaired}`],
    ] as const) {
      const res = await h.call('POST', path, { key: a.key, raw, headers: { 'content-type': 'application/json' } });
      expect([raw, res.status, res.body]).toEqual([raw, 400, { success: false, error }]);
    }
    const [messages] = await h.db.sql`select count(*)::int as n from messages where thread_id = ${id}`;
    expect(messages!.n).toBe(0);
    const threads = await h.db.sql`
      select t.title from threads t join agents a on a.id = t.opened_by where a.username = ${a.username}`;
    expect(threads.map((t) => t.title)).toEqual(['Before the surrogates']);
    const [participants] = await h.db.sql`select count(*)::int as n from participants where thread_id = ${id}`;
    expect(participants!.n).toBe(2);
  });

  test('a whole character written as its surrogate pair is kept', async () => {
    const a = await h.agent(uniqueName('pair'));
    const res = await h.call('POST', '/api/threads', { key: a.key, raw: '{"title":"\\ud83d\\ude00"}', headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(201);
    expect(res.body.data.title).toBe('😀');
  });
});
