import { beforeAll, expect, test } from 'bun:test';
import { cacheAgents } from '../src/db/agent-cache';
import { connect } from '../src/db/connect';
import { buildApp } from '../src/app';
import { silentLogger } from '../src/log';
import { callApp, uniqueName, useHarness, type Reply, type TestAgent } from './support/harness';
import { openApiValidator } from './support/openapi-validator';
import { eventually } from './support/receiver';
import { MAX_QUEUED_POSTS } from '../src/domain/messages/messages';
import { EXAMPLE_KEY_EXPIRY } from '../src/http/responses';

// Every route driven through a validator built from the published document: any status, body or
// header the document does not describe fails, and so does any documented status or example
// sentence that no request here could make the service answer.
const h = useHarness();
let v: ReturnType<typeof openApiValidator>;
let opener: TestAgent;
let member: TestAgent;
let stranger: TestAgent;
let threadId: string;
let deliveryId: string;
let messageId: string;
let keyId: string;
let fileId: string;
// A key of the opener's that expired at the time the document's example names.
let expired: string;

type Opts = { key?: string; body?: unknown; raw?: string; headers?: Record<string, string> };
async function call(method: string, path: string, opts: Opts = {}): Promise<Reply> {
  const reply = await h.call(method, path, opts);
  v.check(method, path, reply);
  return reply;
}

// A stream of server-sent events never ends by itself: its answer is checked with what came before
// the body, which is then let go.
async function openStream(path: string, opts: { key: string; headers?: Record<string, string> }): Promise<Reply> {
  const response = await h.app.handle(new Request(`http://localhost${path}`, { headers: { authorization: `Bearer ${opts.key}`, ...opts.headers } }));
  await response.body?.cancel();
  const reply = { status: response.status, body: '', headers: response.headers };
  v.check('GET', path, reply);
  return reply;
}

// A path for an operation, its ids those of the thread and delivery made below (or `id`), and the
// query a search cannot do without.
const pathOf = (template: string, id?: string) =>
  template
    .replace(/^\/api\/messages\/search$/, '/api/messages/search?q=first')
    .replace(/^\/api\/files$/, '/api/files?name=contract.txt')
    .replace('{fileId}', id ?? fileId)
    .replace('{threadId}', id ?? threadId)
    .replace('{deliveryId}', id ?? deliveryId)
    .replace('{messageId}', id ?? messageId)
    .replace('{keyId}', id ?? keyId);

beforeAll(async () => {
  const doc = await h.call('GET', '/openapi/json');
  v = openApiValidator(doc.body);
  opener = await h.agent(uniqueName('opener'));
  member = await h.agent(uniqueName('member'));
  stranger = await h.agent(uniqueName('stranger'));
  threadId = await h.thread(opener, [member]);
  const uploaded = await h.call('POST', '/api/files?name=first.txt', { key: opener.key, raw: 'first file', headers: { 'content-type': 'text/plain' } });
  fileId = uploaded.body.data.id;
  messageId = (await h.call('POST', `/api/threads/${threadId}/messages`, { key: opener.key, body: { content: 'first', files: [fileId] } })).body.data.id;
  const inbox = await h.call('GET', '/api/deliveries', { key: member.key });
  deliveryId = inbox.body.data[0].deliveryId;
  const spare = await h.call('POST', '/api/agents/me/keys', { key: opener.key, body: { name: 'spare' } });
  keyId = spare.body.data.id;
  const lapsing = await h.call('POST', '/api/agents/me/keys', { key: opener.key, body: { name: 'lapsed', expiresAt: '2099-01-01T00:00:00Z' } });
  expired = lapsing.body.data.apiKey;
  await h.db.sql`update agent_keys set expires_at = ${EXAMPLE_KEY_EXPIRY} where id = ${lapsing.body.data.id}`;
});

test('every operation answers its documented success', async () => {
  expect((await call('GET', '/api/deliveries', { key: member.key })).status).toBe(200);
  expect((await call('GET', '/api/deliveries?limit=abc&wait=0', { key: opener.key })).status).toBe(200);
  expect((await call('POST', `/api/deliveries/${deliveryId}/delivered`, { key: member.key })).status).toBe(200);
  expect((await call('GET', '/api/threads', { key: member.key })).status).toBe(200);
  expect((await call('GET', `/api/threads?limit=1&after=${threadId}`, { key: member.key })).status).toBe(200);
  const other = await h.agent(uniqueName('other'));
  const opened = await call('POST', '/api/threads', { key: opener.key, body: { title: 'Contract', goal: 'All of it' } });
  expect(opened.status).toBe(201);
  expect((await call('GET', `/api/threads/${threadId}`, { key: member.key })).status).toBe(200);
  expect((await call('POST', `/api/threads/${threadId}/participants`, { key: member.key, body: { username: other.username } })).status).toBe(200);
  expect((await call('POST', `/api/threads/${threadId}/messages`, { key: member.key, body: { content: 'reply', summary: 'a reply' } })).status).toBe(201);
  expect((await call('GET', `/api/threads/${threadId}/messages?limit=1`, { key: opener.key })).status).toBe(200);
  expect((await call('POST', `/api/deliveries/${deliveryId}/acknowledge`, { key: member.key })).status).toBe(200);
  expect((await call('POST', `/api/threads/${opened.body.data.id}/close`, { key: opener.key })).status).toBe(200);
  expect((await call('GET', `/api/messages/${messageId}/deliveries?waitFor=fetched&wait=0.1`, { key: opener.key })).status).toBe(200);
  expect((await openStream('/api/events', { key: member.key })).status).toBe(200);
  expect((await call('GET', '/api/messages/search?q=first&limit=1', { key: member.key })).status).toBe(200);
  expect((await call('GET', '/api/agents/me/keys', { key: opener.key })).status).toBe(200);
  const made = await call('POST', '/api/agents/me/keys', { key: member.key, body: { name: 'rotation', expiresAt: '2099-01-01T00:00:00Z' } });
  expect(made.status).toBe(201);
  expect((await call('DELETE', `/api/agents/me/keys/${made.body.data.id}`, { key: member.key })).status).toBe(200);
  expect((await call('PUT', '/api/agents/me/profile', { key: member.key, body: { displayName: 'Member', tags: ['contract'] } })).status).toBe(200);
  expect((await call('GET', '/api/agents/me/profile', { key: member.key })).status).toBe(200);
  expect((await call('GET', '/api/agents?q=member&tag=contract&limit=1', { key: opener.key })).status).toBe(200);
  expect((await call('POST', '/api/files?name=notes.txt', { key: member.key, raw: 'notes', headers: { 'content-type': 'text/plain' } })).status).toBe(201);
  expect((await call('GET', `/api/files/${fileId}`, { key: member.key })).status).toBe(200);
  const content = `/api/files/${fileId}/content`;
  expect((await call('GET', content, { key: member.key })).body).toBe('first file');
  expect((await call('GET', content, { key: member.key, headers: { range: 'bytes=6-' } })).body).toBe('file');
  expect((await call('GET', content, { key: member.key, headers: { range: 'bytes=99-' } })).status).toBe(416);
});

test('every operation answers its own refusals as documented', async () => {
  const statusOf = async (method: string, path: string, opts: Opts) => (await call(method, path, opts)).status;
  expect(await statusOf('GET', '/api/deliveries?wait=61', { key: member.key })).toBe(400);
  expect(await statusOf('GET', '/api/deliveries?after=yesterday', { key: member.key })).toBe(400);
  expect(await statusOf('GET', '/api/threads?after=yesterday', { key: member.key })).toBe(400);
  const receipts = pathOf('/api/messages/{messageId}/deliveries');
  expect(await statusOf('GET', `${receipts}?waitFor=read`, { key: opener.key })).toBe(400);
  expect(await statusOf('GET', `${receipts}?waitFor=fetched&wait=61`, { key: opener.key })).toBe(400);
  expect(await statusOf('GET', receipts, { key: member.key })).toBe(404);
  for (const template of ['/api/deliveries/{deliveryId}/delivered', '/api/deliveries/{deliveryId}/acknowledge']) {
    expect(await statusOf('POST', pathOf(template), { key: stranger.key })).toBe(404);
  }
  expect(await statusOf('POST', '/api/threads', { key: opener.key, body: {} })).toBe(400);
  expect(await statusOf('POST', '/api/threads', { key: opener.key, body: { title: 'x'.repeat(201) } })).toBe(400);
  expect(await statusOf('POST', '/api/threads', { key: opener.key, body: { title: 'x', participantUsernames: ['ghost-bot'] } })).toBe(400);
  for (const template of ['/api/threads/{threadId}', '/api/threads/{threadId}/messages']) {
    expect(await statusOf('GET', pathOf(template), { key: stranger.key })).toBe(404);
  }
  const participants = pathOf('/api/threads/{threadId}/participants');
  expect(await statusOf('POST', participants, { key: member.key, body: {} })).toBe(400);
  expect(await statusOf('POST', participants, { key: member.key, body: { username: 'ghost-bot' } })).toBe(400);
  expect(await statusOf('POST', participants, { key: stranger.key, body: { username: member.username } })).toBe(404);
  const messages = pathOf('/api/threads/{threadId}/messages');
  expect(await statusOf('POST', messages, { key: member.key, body: { content: 'x'.repeat(10_001) } })).toBe(400);
  expect(await statusOf('POST', messages, { key: member.key, body: { content: 'x'.repeat(201) } })).toBe(400);
  expect(await statusOf('POST', messages, { key: stranger.key, body: { content: 'hi' } })).toBe(404);
  const loner = await h.agent(uniqueName('loner'));
  const gone = await h.agent(uniqueName('gone'));
  const lonely = await h.thread(loner, [gone]);
  await h.db.sql`update agents set archived_at = now() where username = ${gone.username}`;
  expect(await statusOf('POST', pathOf('/api/threads/{threadId}/messages', lonely), { key: loner.key, body: { content: 'anyone?' } })).toBe(400);
  // An Idempotency-Key that is malformed, or used before for a different request (keys are each
  // agent's own: one agent per operation, so the documented key can be reused).
  const key = '9f1c2d7e-4b3a-4e55-9a61-0c2b8f7d3e10';
  for (const [agent, path, first, second] of [
    [opener, '/api/threads', { title: 'Once' }, { title: 'Twice' }],
    [member, messages, { content: 'once' }, { content: 'twice' }],
  ] as const) {
    expect(await statusOf('POST', path, { key: agent.key, body: first, headers: { 'idempotency-key': 'two words' } })).toBe(400);
    expect(await statusOf('POST', path, { key: agent.key, body: first, headers: { 'idempotency-key': key } })).toBe(201);
    expect(await statusOf('POST', path, { key: agent.key, body: second, headers: { 'idempotency-key': key } })).toBe(400);
  }
  const close = pathOf('/api/threads/{threadId}/close');
  expect(await statusOf('POST', close, { key: member.key })).toBe(403);
  expect(await statusOf('POST', close, { key: stranger.key })).toBe(404);
  expect(await statusOf('POST', close, { key: opener.key })).toBe(200);
  expect(await statusOf('POST', messages, { key: member.key, body: { content: 'too late' } })).toBe(400);
  expect(await statusOf('GET', '/api/events', { key: member.key, headers: { 'last-event-id': 'yesterday' } })).toBe(400);
  for (const query of ['', 'q=' + 'x'.repeat(201), 'q=-first', 'q=first&after=yesterday']) {
    expect(await statusOf('GET', `/api/messages/search?${query}`, { key: member.key })).toBe(400);
  }
  expect(await statusOf('GET', `/api/messages/search?q=first&threadId=${threadId}`, { key: stranger.key })).toBe(404);
  for (const template of ['/api/files/{fileId}', '/api/files/{fileId}/content']) {
    expect(await statusOf('GET', pathOf(template), { key: stranger.key })).toBe(404);
  }
  for (const [path, raw, type] of [
    ['/api/files', 'x', 'text/plain'],
    ['/api/files?name=docs/report.pdf', 'x', 'application/pdf'],
    ['/api/files?name=empty.txt', '', 'text/plain'],
    ['/api/files?name=dot.png', 'not a png', 'image/png'],
  ]) {
    expect(await statusOf('POST', path!, { key: stranger.key, raw, headers: { 'content-type': type! } })).toBe(400);
  }
  // A body shorter than its Content-Length says.
  const short = await h.app.handle(
    new Request('http://localhost/api/files?name=short.txt', { method: 'POST', headers: { authorization: `Bearer ${stranger.key}`, 'content-length': '4' }, body: 'abc' }),
  );
  const shortReply = { status: short.status, body: await short.json(), headers: short.headers };
  v.check('POST', '/api/files', shortReply);
  expect(shortReply.status).toBe(400);
  for (const body of [{}, { name: 'x'.repeat(65) }, { name: 'x', expiresAt: 'tomorrow' }, { name: 'x', expiresAt: '2020-01-01T00:00:00Z' }]) {
    expect(await statusOf('POST', '/api/agents/me/keys', { key: stranger.key, body })).toBe(400);
  }
  const [strangerKey] = (await call('GET', '/api/agents/me/keys', { key: stranger.key })).body.data;
  expect(await statusOf('DELETE', `/api/agents/me/keys/${keyId}`, { key: stranger.key })).toBe(404);
  expect(await statusOf('DELETE', `/api/agents/me/keys/${strangerKey.id}`, { key: stranger.key })).toBe(409);
  const keyring = await h.agent(uniqueName('keyring'));
  for (let i = 1; i < 5; i++) expect(await statusOf('POST', '/api/agents/me/keys', { key: keyring.key, body: { name: `k${i}` } })).toBe(201);
  expect(await statusOf('POST', '/api/agents/me/keys', { key: keyring.key, body: { name: 'sixth' } })).toBe(409);
  for (const query of ['q=' + 'x'.repeat(201), 'q=-first', 'after=Not%20a%20name']) {
    expect(await statusOf('GET', `/api/agents?${query}`, { key: member.key })).toBe(400);
  }
  for (const body of [{ displayName: 'x'.repeat(101) }, { description: 'x'.repeat(2001) }, { tags: Array.from({ length: 21 }, (_, i) => `t${i}`) }, { tags: ['two words'] }]) {
    expect(await statusOf('PUT', '/api/agents/me/profile', { key: member.key, body })).toBe(400);
  }
  // Events after this id were removed by the retention sweep.
  await h.db.sql`insert into agent_event_floors (agent_id, xid, seq) select id, '2', 1 from agents where username = ${member.username}`;
  expect(await statusOf('GET', '/api/events?lastEventId=1-1', { key: member.key })).toBe(410);
  // One stream, or wait, more than an agent may hold open at once.
  const holder = await h.agent(uniqueName('holder'));
  const held: Response[] = [];
  for (let i = 0; i < h.config.HELD_REQUESTS_PER_AGENT; i++) {
    held.push(await h.app.handle(new Request('http://localhost/api/events', { headers: { authorization: `Bearer ${holder.key}` } })));
  }
  expect(held.filter((r) => r.status !== 200)).toEqual([]);
  expect(await statusOf('GET', '/api/events', { key: holder.key })).toBe(429);
  expect(await statusOf('GET', '/api/deliveries?wait=5', { key: holder.key })).toBe(429);
  const sent = (await h.post(holder, await h.thread(holder, [member]), 'held')).id;
  expect(await statusOf('GET', `/api/messages/${sent}/deliveries?waitFor=fetched&wait=5`, { key: holder.key })).toBe(429);
  // Without a wait nothing is held, and the inbox answers.
  expect(await statusOf('GET', '/api/deliveries', { key: holder.key })).toBe(200);
  for (const response of held) await response.body!.cancel();
  // Quotas a person set, used up; and a message held for a person.
  const counted = await h.agent(uniqueName('counted'));
  await h.db.sql`update agents set messages_per_minute = 1, threads_per_hour = 1 where username = ${counted.username}`;
  const countedThread = await h.thread(counted, [member]);
  expect(await statusOf('POST', '/api/threads', { key: counted.key, body: { title: 'one too many' } })).toBe(429);
  const countedPath = pathOf('/api/threads/{threadId}/messages', countedThread);
  expect(await statusOf('POST', countedPath, { key: counted.key, body: { content: 'one' } })).toBe(201);
  expect(await statusOf('POST', countedPath, { key: counted.key, body: { content: 'two' } })).toBe(429);
  await h.db.sql`update agents set holds_messages = true where username = ${member.username}`;
  expect(await statusOf('POST', countedPath, { key: member.key, body: { content: 'waits' } })).toBe(202);
  await h.db.sql`update agents set holds_messages = false where username = ${member.username}`;
});

test('every route refuses bad keys, a NUL in the URL, and (POST) a malformed or oversized body', async () => {
  const unknown = `agt_${'A'.repeat(43)}`;
  for (const { template, method, operation } of v.operations) {
    const path = pathOf(template);
    expect((await call(method, path)).status).toBe(401);
    expect((await call(method, path, { headers: { authorization: 'Basic b3BlbmVyOnNlY3JldA==' } })).status).toBe(401);
    expect((await call(method, path, { key: 'sk_live_not_ours' })).status).toBe(401);
    expect((await call(method, path, { key: unknown })).status).toBe(401);
    expect((await call(method, path, { key: expired })).status).toBe(401);
    const withNul = template.includes('{') ? pathOf(template, '%00') : `${template}?limit=%00`;
    expect((await call(method, withNul, { key: opener.key })).status).toBe(400);
    if (method === 'GET') continue;
    // An upload's body is bytes, not JSON, under a limit of its own.
    const bytes = operation.requestBody?.content['*/*'] !== undefined;
    if (!bytes) expect((await call(method, path, { key: opener.key, raw: '{"content": ' })).status).toBe(400);
    expect((await call(method, path, { key: opener.key, raw: 'x'.repeat((bytes ? h.config.FILE_MAX_BYTES : h.config.BODY_LIMIT_BYTES) + 1) })).status).toBe(413);
  }
});

test('a post beyond the queue of posts waiting for the database is 503 with Retry-After', async () => {
  const busyThread = await h.thread(opener, [member]);
  const path = pathOf('/api/threads/{threadId}/messages', busyThread);
  // More posts than the default quota allows a minute: a person raised this agent's.
  await h.db.sql`update agents set messages_per_minute = 1000000 where username = ${member.username}`;
  const lock = await h.db.sql.reserve();
  try {
    await lock`begin`;
    await lock`lock table messages in access exclusive mode`;
    // Two statements in flight take up to 64 posts each; the queue holds the next MAX_QUEUED_POSTS.
    const waiting = Array.from({ length: MAX_QUEUED_POSTS + 200 }, () => h.call('POST', path, { key: member.key, body: { content: 'queued' } }));
    await eventually(async () => (await h.db.sql`select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and datname = current_database()`)[0]!.n >= 2);
    const refused = await call('POST', path, { key: member.key, body: { content: 'one too many' } });
    expect([refused.status, refused.headers.get('retry-after'), refused.body]).toEqual([
      503,
      '1',
      { success: false, error: 'The service is busy: too many writes are waiting for the database. Retry in a moment.' },
    ]);
    await lock`rollback`;
    const statuses = (await Promise.all(waiting)).map((r) => r.status);
    const [stored] = await h.db.sql`select count(*)::int as n from messages where thread_id = ${busyThread}`;
    expect(statuses.filter((s) => s !== 201 && s !== 503)).toEqual([]);
    expect(statuses.filter((s) => s === 201)).toHaveLength(stored!.n);
    expect(stored!.n).toBeGreaterThanOrEqual(MAX_QUEUED_POSTS);
  } finally {
    lock.release();
  }
});

// Searches past their bounds: stopped at SEARCH_TIMEOUT_MS (400), a third of one agent (429), past
// the queue (503 with Retry-After). `table` is what the search reads, locked to hold it.
async function searchBounds(path: string, table: string, reading: string) {
  const searchers = await Promise.all(Array.from({ length: 19 }, () => h.agent(uniqueName('searcher'))));
  const lock = await h.db.sql.reserve();
  const asked: Promise<Reply>[] = [];
  try {
    await lock`begin`;
    await lock`lock table ${lock(table)} in access exclusive mode`;
    const waitingForTheIndex = async () =>
      (await h.db.sql`select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and query like ${`%${reading}%`}`)[0]!.n;
    const [first, ...others] = searchers;
    asked.push(call('GET', path, { key: first!.key }), call('GET', path, { key: first!.key }));
    await eventually(async () => (await waitingForTheIndex()) === 2 || null);
    const third = await call('GET', path, { key: first!.key });
    expect(third.status).toBe(429);
    // Two more hold a connection and wait for the index; 32 wait for a turn; the rest are refused at once.
    asked.push(...others.flatMap((s) => [call('GET', path, { key: s.key }), call('GET', path, { key: s.key })]));
    const answered: Reply[] = [];
    for (const reply of asked) void reply.then((r) => answered.push(r));
    await eventually(async () => answered.filter((r) => r.status === 400).length === 4 || null, 15_000);
  } finally {
    await lock`rollback`;
    lock.release();
  }
  const statuses = (await Promise.all(asked)).map((r) => r.status);
  expect(statuses.filter((s) => s === 400)).toHaveLength(4);
  expect(statuses.filter((s) => s === 503).length).toBeGreaterThanOrEqual(2);
  expect(statuses.filter((s) => ![200, 400, 503].includes(s))).toEqual([]);
}

test('searches past their bounds: stopped at SEARCH_TIMEOUT_MS (400), a third of one agent (429), past the queue (503 with Retry-After)', async () => {
  await searchBounds(pathOf('/api/messages/search'), 'message_search', 'message_search ms');
}, 30_000);

test('the directory past the same bounds', async () => {
  await searchBounds('/api/agents?q=member', 'agent_profiles', 'agent_profiles p');
}, 30_000);

test('every route answers 503 in the envelope while the database is away', async () => {
  const sql = connect(h.db.url, 1);
  await sql.end();
  const app = buildApp({ sql, config: h.config, log: silentLogger, inboxSignal: h.inboxSignal, agentCache: cacheAgents(sql, silentLogger) });
  for (const { template, method } of v.operations) {
    const path = pathOf(template);
    const reply = await callApp(app, method, path, { headers: { authorization: `Bearer ${member.key}` } });
    v.check(method, path, reply);
    expect(reply.status).toBe(503);
  }
});

test('contact policies refuse as documented, with their code', async () => {
  const bob = await h.agent('bob');
  const asker = await h.agent(uniqueName('asker'));
  const own = await h.thread(asker, []);
  const participants = pathOf('/api/threads/{threadId}/participants', own);
  const refusal = async (method: string, path: string, body: unknown) => {
    const reply = await call(method, path, { key: asker.key, body });
    return [reply.status, reply.body.code];
  };
  const bobs = async (policy: string, list: string | null) => {
    await h.db.sql`update agents set contact_policy = ${policy} where username = 'bob'`;
    await h.db.sql`delete from agent_contacts`;
    if (list) {
      await h.db.sql`insert into agent_contacts (agent_id, contact_id, list)
                     select b.id, a.id, ${list} from agents b, agents a where b.username = 'bob' and a.username = ${asker.username}`;
    }
  };
  for (const [policy, list, code] of [['contacts', null, 'contact_policy'], ['closed', null, 'contact_policy'], ['open', 'block', 'blocked']] as const) {
    await bobs(policy, list);
    expect(await refusal('POST', '/api/threads', { title: 'Hello', participantUsernames: [bob.username] })).toEqual([403, code]);
    expect(await refusal('POST', participants, { username: bob.username })).toEqual([403, code]);
  }
  await bobs('open', null);
  expect((await call('GET', '/api/agents/me/contact-policy', { key: bob.key })).status).toBe(200);
});

// Last: it breaks this file's database. A query that fails for a reason no request can fix is a
// 500 with the plain sentence, on every route.
test('every route answers 500 in the envelope when a query fails unexpectedly', async () => {
  await h.db.sql`alter table deliveries rename to deliveries_gone`;
  await h.db.sql`alter table participants rename to participants_gone`;
  await h.db.sql`alter table threads rename to threads_gone`;
  await h.db.sql`alter table agent_contacts rename to agent_contacts_gone`;
  await h.db.sql`alter table agent_keys rename to agent_keys_gone`;
  await h.db.sql`alter table agent_profiles rename to agent_profiles_gone`;
  await h.db.sql`alter table files rename to files_gone`;
  for (const { template, method } of v.operations) {
    const body = method === 'POST' || method === 'PUT' ? { title: 'x', content: 'x', username: member.username, name: 'x' } : undefined;
    expect((await call(method, pathOf(template), { key: member.key, body })).status).toBe(500);
  }
});

test('every documented status and example sentence was answered above', () => {
  expect(v.unseen()).toEqual([]);
});

test('the document publishes no operation this file does not drive', () => {
  expect(v.operations.map((o) => o.operation.operationId).sort()).toEqual(
    [
      'acknowledgeDelivery',
      'addParticipant',
      'createKey',
      'downloadFile',
      'getFile',
      'uploadFile',
      'listKeys',
      'revokeKey',
      'findAgents',
      'getContactPolicy',
      'getMessageDeliveries',
      'getOwnProfile',
      'getThread',
      'streamEvents',
      'listInbox',
      'listMessages',
      'listThreads',
      'openThread',
      'postMessage',
      'reportDelivered',
      'requestClose',
      'searchMessages',
      'setOwnProfile',
    ].sort(),
  );
});
