import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { randomUUID } from 'node:crypto';
import { sweepIdempotencyKeys } from '../src/domain/messages/idempotency';
import { silentLogger } from '../src/log';
import { createService } from '../src/service';
import { callApp, uniqueName, useHarness, type TestAgent } from './support/harness';
import { mcpClient } from './support/mcp-client';

// Send exactly once: Idempotency-Key over HTTP, idempotencyKey over MCP.
const h = useHarness();
let sender: TestAgent;
let recipient: TestAgent;
let threadId: string;

beforeAll(async () => {
  sender = await h.agent(uniqueName('sender'));
  recipient = await h.agent(uniqueName('recipient'));
  threadId = await h.thread(sender, [recipient]);
});

const postOnce = (key: string, content = 'exactly once', from = sender, thread = threadId) =>
  h.call('POST', `/api/threads/${thread}/messages`, { key: from.key, body: { content }, headers: { 'idempotency-key': key } });
const messagesWith = async (content: string) =>
  (await h.db.sql`select count(*)::int as n from messages where content = ${content}`)[0]!.n as number;
const deliveriesOf = async (content: string) =>
  (await h.db.sql`select count(*)::int as n from deliveries d join messages m on m.id = d.message_id where m.content = ${content}`)[0]!.n as number;

describe('over HTTP', () => {
  test('a repeat answers the first answer and posts nothing', async () => {
    const key = randomUUID();
    const first = await postOnce(key, 'posted once');
    const again = await postOnce(key, 'posted once');
    expect(first.status).toBe(201);
    expect([again.status, again.body]).toEqual([201, first.body]);
    expect(await messagesWith('posted once')).toBe(1);
    expect(await deliveriesOf('posted once')).toBe(1);
  });

  test('concurrent repeats post exactly one message, and every one of them answers it', async () => {
    const key = randomUUID();
    const answers = await Promise.all(Array.from({ length: 20 }, () => postOnce(key, 'raced')));
    expect(answers.map((a) => a.status)).toEqual(Array(20).fill(201));
    expect(new Set(answers.map((a) => a.body.data.id)).size).toBe(1);
    expect(await messagesWith('raced')).toBe(1);
    expect(await deliveriesOf('raced')).toBe(1);
    const inbox = await h.call('GET', '/api/deliveries', { key: recipient.key });
    expect(inbox.body.data.filter((e: { messageId: string }) => e.messageId === answers[0]!.body.data.id)).toHaveLength(1);
  });

  test('the same key with a different request is refused, naming the key; nothing is posted', async () => {
    const key = randomUUID();
    expect((await postOnce(key, 'the first request')).status).toBe(201);
    const other = await postOnce(key, 'a different request');
    expect([other.status, other.body]).toEqual([
      400,
      { success: false, error: `Idempotency-Key ${key} was already used for a different request; use a new key for a new request.` },
    ]);
    expect(await messagesWith('a different request')).toBe(0);
    const otherThread = await h.thread(sender, [recipient]);
    expect((await postOnce(key, 'the first request', sender, otherThread)).status).toBe(400);
  });

  test('keys are each agent’s own, for each operation', async () => {
    const key = randomUUID();
    const mine = await postOnce(key, 'same key, two agents');
    const theirs = await postOnce(key, 'same key, two agents', recipient);
    expect([mine.status, theirs.status]).toEqual([201, 201]);
    expect(theirs.body.data.id).not.toBe(mine.body.data.id);
    expect(await messagesWith('same key, two agents')).toBe(2);
    const opened = await h.call('POST', '/api/threads', { key: sender.key, body: { title: 'Same key, other operation' }, headers: { 'idempotency-key': key } });
    expect(opened.status).toBe(201);
  });

  test('a repeat answers the first body exactly as it was written, keys in their order', async () => {
    const key = randomUUID();
    const open = () => callApp(h.app, 'POST', '/api/threads', {
      headers: { authorization: `Bearer ${sender.key}`, 'idempotency-key': key },
      body: { title: 'Byte for byte', goal: 'the same' },
    });
    const first = await open();
    const again = await open();
    expect(JSON.stringify(again.body)).toBe(JSON.stringify(first.body));
  });

  test('a refused request leaves its key free for the corrected one', async () => {
    const key = randomUUID();
    const tooLong = await postOnce(key, 'x'.repeat(201));
    expect(tooLong.status).toBe(400);
    const fixed = await postOnce(key, 'x'.repeat(200));
    expect(fixed.status).toBe(201);
  });

  test('a malformed key is refused before anything is written', async () => {
    for (const key of ['has space', 'x'.repeat(256), 'ünïcode']) {
      const res = await postOnce(key, 'never posted');
      expect([res.status, res.body]).toEqual([400, { success: false, error: 'Idempotency-Key must be 1 to 255 printable ASCII characters without spaces' }]);
    }
    expect(await messagesWith('never posted')).toBe(0);
  });

  test('opening a thread: a repeat answers the same thread and opens no other', async () => {
    const key = randomUUID();
    const open = () =>
      h.call('POST', '/api/threads', { key: sender.key, body: { title: 'Opened once', participantUsernames: [recipient.username] }, headers: { 'idempotency-key': key } });
    const answers = await Promise.all([open(), open(), open()]);
    expect(answers.map((a) => a.status)).toEqual([201, 201, 201]);
    expect(new Set(answers.map((a) => a.body.data.id)).size).toBe(1);
    const [opened] = await h.db.sql`select count(*)::int as n from threads where title = 'Opened once'`;
    expect(opened!.n).toBe(1);
  });

  test('a key past its retention is used afresh, and the sweep deletes only expired keys', async () => {
    const key = randomUUID();
    const first = await postOnce(key, 'kept for a day');
    await h.db.sql`update idempotency_keys set created_at = now() - interval '25 hours' where key = ${key}`;
    const later = await postOnce(key, 'kept for a day');
    expect(later.status).toBe(201);
    expect(later.body.data.id).not.toBe(first.body.data.id);
    const fresh = randomUUID();
    await postOnce(fresh, 'swept later');
    await h.db.sql`update idempotency_keys set created_at = now() - interval '25 hours' where key = ${key}`;
    expect(await sweepIdempotencyKeys(h.db.sql, h.config.IDEMPOTENCY_RETENTION_MS)).toEqual({ deleted: 1 });
    const left = await h.db.sql`select key from idempotency_keys where key in (${key}, ${fresh})`;
    expect(left.map((r) => r.key)).toEqual([fresh]);
  });
});

describe('across a restart', () => {
  const services: Awaited<ReturnType<typeof createService>>[] = [];
  afterAll(async () => {
    for (const s of services) await s.stop().catch(() => {});
  });

  test('a repeat sent to the restarted service answers the first answer', async () => {
    const key = randomUUID();
    const headers = { authorization: `Bearer ${sender.key}`, 'idempotency-key': key };
    const before = await createService(h.config, { log: silentLogger, http: true, worker: false });
    services.push(before);
    const first = await callApp(before.app, 'POST', `/api/threads/${threadId}/messages`, { headers, body: { content: 'survives a restart' } });
    await before.stop();
    const after = await createService(h.config, { log: silentLogger, http: true, worker: false });
    services.push(after);
    const again = await callApp(after.app, 'POST', `/api/threads/${threadId}/messages`, { headers, body: { content: 'survives a restart' } });
    expect(first.status).toBe(201);
    expect([again.status, again.body]).toEqual([201, first.body]);
    expect(await messagesWith('survives a restart')).toBe(1);
  });
});

describe('over MCP', () => {
  let base: string;
  beforeAll(() => {
    h.app.listen({ port: 0, hostname: '127.0.0.1' });
    base = `http://127.0.0.1:${h.app.server!.port}`;
  });
  afterAll(() => h.app.stop(true));

  test('send_message and open_thread with idempotencyKey create once; a bad key is the same sentence', async () => {
    const client = await mcpClient(base, sender.key);
    const key = randomUUID();
    const send = () => client.call('send_message', { threadId, content: 'sent once over MCP', idempotencyKey: key });
    const [a, b] = [await send(), await send()];
    expect(b).toEqual(a);
    expect(await messagesWith('sent once over MCP')).toBe(1);
    expect(await client.call('send_message', { threadId, content: 'another', idempotencyKey: key })).toEqual({
      error: `Idempotency-Key ${key} was already used for a different request; use a new key for a new request.`,
    });
    const threadKey = randomUUID();
    const open = () => client.call('open_thread', { title: 'MCP once', idempotencyKey: threadKey });
    const [x, y] = [await open(), await open()];
    expect(y.data.id).toBe(x.data.id);
    // The same key and request over HTTP is the same request.
    const http = await h.call('POST', '/api/threads', { key: sender.key, body: { title: 'MCP once' }, headers: { 'idempotency-key': threadKey } });
    expect(http.body.data.id).toBe(x.data.id);
    expect(await client.call('send_message', { threadId, content: 'x', idempotencyKey: 'two words' })).toEqual({
      error: 'idempotencyKey must be 1 to 255 printable ASCII characters without spaces',
    });
    await client.close();
  });
});
