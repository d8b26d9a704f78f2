import { expect, test } from 'bun:test';
import { hashKey } from '../src/domain/agents/keys';
import { runCommand } from '../src/cli/commands';
import { uniqueName, useHarness, type TestAgent } from './support/harness';
import { eventReader } from './support/events';
import { eventually } from './support/receiver';

// An agent's several keys through the agent API: created and shown once, answering at once,
// revoked at once (the key in use included), at most five, never the last; expiry refused with
// its own sentence; streams and waits held with a key end when it is revoked or expires.
const h = useHarness();

const UNKNOWN = { success: false, error: 'The API key is not recognised or its agent is archived.' };
const ID = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

const keys = (agent: TestAgent | string) => h.call('GET', '/api/agents/me/keys', { key: typeof agent === 'string' ? agent : agent.key });
const create = (key: string, body: unknown) => h.call('POST', '/api/agents/me/keys', { key, body });
const revoke = (key: string, id: string) => h.call('DELETE', `/api/agents/me/keys/${id}`, { key });
const threadsWith = async (key: string) => (await h.call('GET', '/api/threads', { key })).status;

test('an agent starts with one key, named initial, and lists it as current without the key itself', async () => {
  const a = await h.agent(uniqueName('first'));
  const listed = await keys(a);
  expect(listed.status).toBe(200);
  expect(listed.body).toEqual({
    success: true,
    data: [{ id: expect.stringMatching(ID), name: 'initial', prefix: a.key.slice(0, 12), createdAt: expect.stringMatching(TIME), lastUsedAt: null, expiresAt: null, current: true }],
  });
  expect(JSON.stringify(listed.body)).not.toContain(a.key.slice(12));
  const [stored] = await h.db.sql`select key_hash from agent_keys where id = ${listed.body.data[0].id}`;
  expect(Buffer.from(stored!.key_hash)).toEqual(hashKey(a.key));
});

test('rotation by the agent itself: the new key answers at once, the old one is refused at once, and the audit trail records no person', async () => {
  const a = await h.agent(uniqueName('rotor'));
  const [initial] = (await keys(a)).body.data;
  expect(await threadsWith(a.key)).toBe(200);

  const made = await create(a.key, { name: 'deploy 2026-11', expiresAt: '2031-01-01T00:00:00Z' });
  expect(made.status).toBe(201);
  expect(made.body).toEqual({
    success: true,
    data: {
      id: expect.stringMatching(ID),
      name: 'deploy 2026-11',
      prefix: made.body.data.apiKey.slice(0, 12),
      createdAt: expect.stringMatching(TIME),
      lastUsedAt: null,
      expiresAt: '2031-01-01T00:00:00.000Z',
      current: false,
      apiKey: expect.stringMatching(/^agt_[A-Za-z0-9_-]{43}$/),
    },
  });
  const fresh = made.body.data.apiKey as string;
  expect(await threadsWith(fresh)).toBe(200);
  expect((await keys(fresh)).body.data.map((k: { name: string; current: boolean }) => [k.name, k.current])).toEqual([
    ['initial', false],
    ['deploy 2026-11', true],
  ]);

  // The new key revokes the old one; the old one was cached by this instance a moment ago.
  const revoked = await revoke(fresh, initial.id);
  expect(revoked.status).toBe(200);
  expect(revoked.body.data).toEqual({ ...initial, current: false });
  const refused = await h.call('GET', '/api/threads', { key: a.key });
  expect([refused.status, refused.body]).toEqual([401, UNKNOWN]);
  expect(await threadsWith(fresh)).toBe(200);
  // The previous release authenticates by agents.key_hash alone: it no longer holds the old key.
  const [row] = await h.db.sql`select key_hash from agents where username = ${a.username}`;
  expect(Buffer.from(row!.key_hash)).not.toEqual(hashKey(a.key));
  const [audited] = await h.db.sql`select count(*)::int as n from audit_events where subject = ${a.username} and action like 'agent.key.%'`;
  expect(audited!.n).toBe(0);
});

test('revoking the key in use is allowed and is its last answer; the last key that has not expired is refused with 409', async () => {
  const a = await h.agent(uniqueName('self'));
  const second = (await create(a.key, { name: 'second' })).body.data;
  const [initial] = (await keys(a)).body.data;
  const own = await revoke(a.key, initial.id);
  expect([own.status, own.body.data.current]).toEqual([200, true]);
  expect([(await keys(a)).status, (await keys(second.apiKey)).body.data.length]).toEqual([401, 1]);

  const last = await revoke(second.apiKey, second.id);
  expect([last.status, last.body]).toEqual([
    409,
    { success: false, error: "This is the agent's last key that has not expired: create another before revoking it, or archive the agent to shut it out." },
  ]);
  // An expired key does not count as one left.
  const spare = (await create(second.apiKey, { name: 'spare' })).body.data;
  await h.db.sql`update agent_keys set expires_at = now() - interval '1 second' where id = ${spare.id}`;
  expect((await revoke(second.apiKey, second.id)).status).toBe(409);
  expect((await revoke(second.apiKey, spare.id)).status).toBe(200);
});

test('a key of another agent, or no key at all, is 404', async () => {
  const a = await h.agent(uniqueName('mine'));
  const b = await h.agent(uniqueName('theirs'));
  const [theirs] = (await keys(b)).body.data;
  for (const id of [theirs.id, '01a1ff80-d963-77fb-8efa-675ab5c7dfaa', 'not-an-id']) {
    const res = await revoke(a.key, id);
    expect([res.status, res.body]).toEqual([404, { success: false, error: 'No such key for this agent.' }]);
  }
  expect(await threadsWith(b.key)).toBe(200);
});

test('bad names and expiries are 400 with the field named', async () => {
  const a = await h.agent(uniqueName('picky'));
  for (const [body, error] of [
    [{}, 'name is required'],
    [{ name: '' }, 'name must not be empty'],
    [{ name: 'x'.repeat(65) }, 'name must be at most 64 characters'],
    [{ name: 'x', expiresAt: 'tomorrow' }, 'expiresAt must be a date and time with its offset, such as 2027-02-01T00:00:00Z'],
    [{ name: 'x', expiresAt: '2027-02-01T00:00:00' }, 'expiresAt must be a date and time with its offset, such as 2027-02-01T00:00:00Z'],
    [{ name: 'x', expiresAt: '2020-01-01T00:00:00Z' }, 'expiresAt must be in the future'],
  ] as const) {
    const res = await create(a.key, body);
    expect([res.status, res.body.error]).toEqual([400, error]);
  }
  expect((await keys(a)).body.data).toHaveLength(1);
});

test('five keys at most, kept by the database when ten are asked for at once', async () => {
  const a = await h.agent(uniqueName('many'));
  const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => create(a.key, { name: `k${i}` })));
  expect(answers.map((r) => r.status).toSorted()).toEqual([201, 201, 201, 201, 409, 409, 409, 409, 409, 409]);
  expect(answers.find((r) => r.status === 409)!.body).toEqual({
    success: false,
    error: 'This agent already has 5 keys, the most it may have: revoke one before creating another.',
  });
  const [count] = await h.db.sql`select count(*)::int as n from agent_keys k join agents a on a.id = k.agent_id where a.username = ${a.username}`;
  expect(count!.n).toBe(5);
  await expect(h.db.sql`insert into agent_keys (agent_id, slot, name, key_hash) select id, 6, 'sixth', '\\x06' from agents where username = ${a.username}`).rejects.toThrow(/check/);
});

test('an expired key is refused with its own sentence, at once even where it was cached', async () => {
  const a = await h.agent(uniqueName('expiring'));
  const made = (await create(a.key, { name: 'brief', expiresAt: new Date(Date.now() + 60_000).toISOString() })).body.data;
  expect(await threadsWith(made.apiKey)).toBe(200);
  await h.db.sql`update agent_keys set expires_at = '2026-01-01T00:00:00Z' where id = ${made.id}`;
  const refused = await eventually(async () => {
    const res = await h.call('GET', '/api/threads', { key: made.apiKey });
    return res.status === 401 ? res : null;
  }, 2000);
  expect(refused.body).toEqual({
    success: false,
    error: "The API key expired at 2026-01-01T00:00:00.000Z; call with another of the agent's keys, or ask a person for a new one.",
  });
  expect(refused.headers.get('www-authenticate')).toBe('Bearer realm="agent-messaging-service", error="invalid_token"');
  expect(await threadsWith(a.key)).toBe(200);
});

test('a key that expires while cached is refused from its expiry, with no change to hear', async () => {
  const a = await h.agent(uniqueName('lapsing'));
  const made = (await create(a.key, { name: 'two seconds', expiresAt: new Date(Date.now() + 1500).toISOString() })).body.data;
  expect(await threadsWith(made.apiKey)).toBe(200);
  await Bun.sleep(1600);
  expect(await threadsWith(made.apiKey)).toBe(401);
});

test('last use is noted in memory and written at most once a minute per key', async () => {
  const a = await h.agent(uniqueName('used'));
  for (let i = 0; i < 5; i++) expect(await threadsWith(a.key)).toBe(200);
  expect((await keys(a)).body.data[0].lastUsedAt).toBeNull();
  await h.agentCache.flushKeyUse();
  const first = (await keys(a)).body.data[0].lastUsedAt;
  expect(first).toMatch(TIME);
  // Used again within the minute: the stored time stays.
  await Bun.sleep(20);
  await h.agentCache.flushKeyUse();
  expect((await keys(a)).body.data[0].lastUsedAt).toBe(first);
  // A stored time more than a minute old is moved on.
  await h.db.sql`update agent_keys set last_used_at = now() - interval '2 minutes' where prefix = ${a.key.slice(0, 12)}`;
  await threadsWith(a.key);
  await h.agentCache.flushKeyUse();
  expect(Date.parse((await keys(a)).body.data[0].lastUsedAt)).toBeGreaterThan(Date.parse(first));
});

test('an event stream and a held wait with a revoked key end at once; the wait answers 401', async () => {
  const a = await h.agent(uniqueName('held'));
  const spare = (await create(a.key, { name: 'spare' })).body.data;
  const [initial] = (await keys(a)).body.data;
  const stream = await h.app.handle(new Request('http://localhost/api/events', { headers: { authorization: `Bearer ${a.key}` } }));
  expect(stream.status).toBe(200);
  const ended = stream.body!.pipeTo(new WritableStream()).then(() => Date.now());
  const waiting = h.call('GET', '/api/deliveries?wait=30', { key: a.key }).then((res) => ({ ...res, at: Date.now() }));
  await eventually(async () => h.inboxSignal.waiting() > 0 || null);
  const revokedAt = Date.now();
  expect((await revoke(spare.apiKey, initial.id)).status).toBe(200);
  const wait = await waiting;
  expect([wait.status, wait.body]).toEqual([401, UNKNOWN]);
  expect(wait.at - revokedAt).toBeLessThan(2000);
  expect((await ended) - revokedAt).toBeLessThan(2000);
});

test('an event stream and a receipts wait end when their key expires', async () => {
  const a = await h.agent(uniqueName('timed'));
  const b = await h.agent(uniqueName('peer'));
  const brief = (await create(a.key, { name: 'brief', expiresAt: new Date(Date.now() + 1500).toISOString() })).body.data;
  const threadId = await h.thread(a, [b]);
  const { id: messageId } = await h.post({ username: a.username, key: brief.apiKey }, threadId, 'hello');
  const stream = await h.app.handle(new Request('http://localhost/api/events', { headers: { authorization: `Bearer ${brief.apiKey}` } }));
  const next = eventReader(stream.body!);
  const opened = Date.now();
  const wait = await h.call('GET', `/api/messages/${messageId}/deliveries?waitFor=fetched&wait=20`, { key: brief.apiKey });
  expect([wait.status, wait.body.error]).toEqual([401, expect.stringMatching(/^The API key expired at /)]);
  expect(Date.now() - opened).toBeLessThan(5000);
  await expect(next()).rejects.toThrow('the event stream ended');
});

test('an A2A blocking send held with a key that expires ends at its expiry, not at the end of its 30 s wait', async () => {
  const a = await h.agent(uniqueName('a2a-timed'));
  const b = await h.agent(uniqueName('a2a-peer'));
  const brief = (await create(a.key, { name: 'brief', expiresAt: new Date(Date.now() + 1500).toISOString() })).body.data;
  const sent = Date.now();
  const res = await h.app.handle(
    new Request(`http://localhost/a2a/agents/${b.username}/`, {
      method: 'POST',
      headers: { authorization: `Bearer ${brief.apiKey}`, 'a2a-version': '1.0', 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: 'expiring', role: 'ROLE_USER', parts: [{ text: 'hello' }] } } }),
    }),
  );
  const answered = Date.now() - sent;
  const body = (await res.json()) as { result: { task: { status: { state: string } } } };
  // Answered as the task stands: the recipient has not fetched it.
  expect([res.status, body.result.task.status.state]).toEqual([200, 'TASK_STATE_SUBMITTED']);
  expect(answered).toBeLessThan(10_000);
  expect(h.inboxSignal.watching()).toBe(0);
});

test('people create, list and revoke keys at the CLI, each decision in the audit trail', async () => {
  const a = await h.agent(uniqueName('managed'));
  const deps = { sql: h.db.sql, config: h.config };
  const made = (await runCommand(deps, ['keys', 'create', a.username, '--name', 'ops', '--expires-at', '2031-06-01T00:00:00Z'])) as { id: string; apiKey: string; prefix: string };
  expect(await threadsWith(made.apiKey)).toBe(200);
  const { username, keys: listed } = (await runCommand(deps, ['keys', 'list', a.username])) as { username: string; keys: { id: string; name: string }[] };
  expect(username).toBe(a.username);
  expect(listed.map((k) => k.name)).toEqual(['initial', 'ops']);
  expect(listed).not.toContainEqual(expect.objectContaining({ apiKey: expect.anything() }));
  // The CLI is another process: this instance drops the key when the database's notice arrives.
  const since = h.agentCache.version();
  await runCommand(deps, ['keys', 'revoke', a.username, made.id]);
  await eventually(async () => h.agentCache.version() !== since || null, 2000);
  expect(await threadsWith(made.apiKey)).toBe(401);
  await expect(runCommand(deps, ['keys', 'revoke', a.username, listed[0]!.id])).rejects.toThrow("This is the agent's last key");
  const trail = await h.db.sql`select actor, action, before, after from audit_events where subject = ${a.username} and action like 'agent.key.%' order by id`;
  expect(trail.map((r) => ({ ...r }))).toEqual([
    { actor: 'cli', action: 'agent.key.create', before: null, after: { key: made.id, name: 'ops', prefix: made.prefix, expiresAt: '2031-06-01T00:00:00.000Z' } },
    { actor: 'cli', action: 'agent.key.revoke', before: { key: made.id, name: 'ops', prefix: made.prefix, expiresAt: '2031-06-01T00:00:00.000Z' }, after: null },
  ]);
  expect(JSON.stringify(trail)).not.toContain(made.apiKey.slice(12));
});
