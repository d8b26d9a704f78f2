import { describe, expect, test } from 'bun:test';
import { oneLine } from '../src/domain/messages/summary-line';
import { uniqueName, useHarness } from './support/harness';
import { eventually } from './support/receiver';
import { BY_CLI } from '../src/domain/people/audit';

const h = useHarness();
const NO_DELIVERY = { success: false, error: 'No such delivery, or it is not addressed to you.' };

async function pair() {
  const [a, b] = await Promise.all(['d', 'd'].map((n) => h.agent(uniqueName(n))));
  const threadId = await h.thread(a!, [b!], 'Deliveries');
  return { a: a!, b: b!, threadId };
}

describe('inbox', () => {
  test('exact entries, oldest first, with the sender summary or the first line', async () => {
    const { a, b, threadId } = await pair();
    const first = await h.post(a, threadId, 'line one\nline two');
    const res2 = await h.call('POST', `/api/threads/${threadId}/messages`, { key: a.key, body: { content: 'x'.repeat(300), summary: 'long one' } });
    const res = await h.call('GET', '/api/deliveries', { key: b.key });
    expect(res.status).toBe(200);
    const [d1] = await h.db.sql`select id, created_at from deliveries where message_id = ${first.id}`;
    expect(res.body.data).toEqual([
      {
        deliveryId: d1!.id,
        messageId: first.id,
        threadId,
        thread: 'Deliveries',
        sender: a.username,
        summary: 'line one',
        receivedAt: (d1!.created_at as Date).toISOString(),
        alreadyRead: false,
        files: [],
      },
      expect.objectContaining({ messageId: res2.body.data.id, summary: 'long one', alreadyRead: false }),
    ]);
    expect(res.body.data[0].receivedAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect((await h.call('GET', '/api/deliveries', { key: a.key })).body.data).toEqual([]);
  });

  // Each delivery carries what its inbox entry shows of the message (sql/036); one written before
  // that has none of it and reads its message instead, and its entry is the same.
  test('a delivery carries its sender, summary line and whether files come; one written without them reads the same', async () => {
    const { a, b, threadId } = await pair();
    const uploaded = await h.call('POST', '/api/files?name=notes.txt', { key: a.key, raw: 'some notes', headers: { 'content-type': 'text/plain' } });
    expect(uploaded.status).toBe(201);
    const post = async (body: object) => {
      const res = await h.call('POST', `/api/threads/${threadId}/messages`, { key: a.key, body });
      expect(res.status).toBe(201);
      return res.body.data.id as string;
    };
    const plain = await post({ content: '\n  first \t line  \nsecond' });
    const summarised = await post({ content: 'y'.repeat(300), summary: 'Short\nsummary' });
    const withFile = await post({ content: 'see the file', files: [uploaded.body.data.id] });
    const stored = await h.db.sql`
      select d.message_id, d.sender, d.summary, d.carries_files from deliveries d join agents r on r.id = d.recipient_id
      where r.username = ${b.username} order by d.id`;
    expect([...stored]).toEqual([
      { message_id: plain, sender: a.username, summary: 'first line', carries_files: false },
      { message_id: summarised, sender: a.username, summary: 'Short\nsummary', carries_files: false },
      { message_id: withFile, sender: a.username, summary: 'see the file', carries_files: true },
    ]);
    const page = (await h.call('GET', '/api/deliveries', { key: b.key })).body.data;
    expect(page.map((e: { summary: string; files: unknown[] }) => [e.summary, e.files.length])).toEqual([
      ['first line', 0],
      ['Short\nsummary', 0],
      ['see the file', 1],
    ]);
    expect(page[2].files).toEqual([
      { id: uploaded.body.data.id, name: 'notes.txt', contentType: 'text/plain', size: 10, sha256: new Bun.CryptoHasher('sha256').update('some notes').digest('hex') },
    ]);
    await h.db.sql`
      update deliveries d set sender = null, summary = null, carries_files = null
      from agents r where r.id = d.recipient_id and r.username = ${b.username}`;
    expect((await h.call('GET', '/api/deliveries', { key: b.key })).body.data).toEqual(page);
  });

  test('the acknowledgement clears the copy of sender and summary the delivery carried', async () => {
    const { a, b, threadId } = await pair();
    const first = await h.post(a, threadId, 'one');
    const second = await h.post(a, threadId, 'two');
    const [entry] = (await h.call('GET', '/api/deliveries', { key: b.key })).body.data;
    expect((await h.call('POST', `/api/deliveries/${entry.deliveryId}/acknowledge`, { key: b.key })).status).toBe(200);
    const stored = await h.db.sql`select message_id, sender, summary, carries_files from deliveries where message_id in ${h.db.sql([first.id, second.id])} order by id`;
    expect([...stored]).toEqual([
      { message_id: first.id, sender: null, summary: null, carries_files: false },
      { message_id: second.id, sender: a.username, summary: 'two', carries_files: false },
    ]);
  });

  test('limit: default 50, cap 200, invalid → default; exactly limit rows when there are more', async () => {
    const { a, b, threadId } = await pair();
    await h.db.sql`
      with m as (
        insert into messages (thread_id, sender_agent_id, sender, content)
        select ${threadId}, a.id, a.username, 'bulk ' || n from agents a, generate_series(1, 205) n where a.username = ${a.username}
        returning id, thread_id
      )
      insert into deliveries (message_id, thread_id, recipient_id, webhook)
      select m.id, m.thread_id, r.id, false from m, agents r where r.username = ${b.username}`;
    const sizes = [];
    for (const q of ['', '?limit=x', '?limit=10', '?limit=200', '?limit=500']) {
      sizes.push((await h.call('GET', `/api/deliveries${q}`, { key: b.key })).body.data.length);
    }
    expect(sizes).toEqual([50, 50, 10, 200, 200]);
  });

  test('acknowledged entries leave; acknowledge is idempotent and keeps the step', async () => {
    const { a, b, threadId } = await pair();
    await h.post(a, threadId, 'one');
    const second = await h.post(a, threadId, 'two');
    const [entry] = (await h.call('GET', '/api/deliveries', { key: b.key })).body.data;
    for (let i = 0; i < 2; i++) {
      const ack = await h.call('POST', `/api/deliveries/${entry.deliveryId}/acknowledge`, { key: b.key });
      expect(ack.status).toBe(200);
      expect(ack.body).toEqual({ success: true, data: { message: 'Delivery acknowledged.' } });
    }
    const left = (await h.call('GET', '/api/deliveries', { key: b.key })).body.data;
    expect(left.map((e: { messageId: string }) => e.messageId)).toEqual([second.id]);
    const [row] = await h.db.sql`select step, acknowledged_at from deliveries where id = ${entry.deliveryId}`;
    expect(row!.step).toBe('accepted');
    expect(row!.acknowledged_at).toBeInstanceOf(Date);
  });

  test('a thread the agent was removed from leaves the inbox', async () => {
    const { a, b, threadId } = await pair();
    await h.post(a, threadId);
    await h.db.sql`delete from participants where thread_id = ${threadId} and agent_id = (select id from agents where username = ${b.username})`;
    expect((await h.call('GET', '/api/deliveries', { key: b.key })).body.data).toEqual([]);
    expect((await h.call('GET', `/api/threads/${threadId}`, { key: b.key })).status).toBe(404);
  });
});

describe('delivered report', () => {
  test('moves to Delivered, and a repeat keeps the first timestamp', async () => {
    const { a, b, threadId } = await pair();
    await h.post(a, threadId);
    const [entry] = (await h.call('GET', '/api/deliveries', { key: b.key })).body.data;
    const first = await h.call('POST', `/api/deliveries/${entry.deliveryId}/delivered`, { key: b.key });
    expect(first.status).toBe(200);
    expect(first.body).toEqual({
      success: true,
      data: { message: 'Delivery reported as delivered.', deliveredAt: expect.stringMatching(/Z$/) },
    });
    await Bun.sleep(5);
    const repeat = await h.call('POST', `/api/deliveries/${entry.deliveryId}/delivered`, {
      key: b.key,
      headers: { 'content-type': 'application/json' },
    });
    expect(repeat.status).toBe(200);
    expect(repeat.body.data.deliveredAt).toBe(first.body.data.deliveredAt);
    const [row] = await h.db.sql`select step, delivered_at from deliveries where id = ${entry.deliveryId}`;
    expect(row!.step).toBe('delivered');
    expect((row!.delivered_at as Date).toISOString()).toBe(first.body.data.deliveredAt);
  });

  test('never moves a fetched delivery backwards', async () => {
    const { a, b, threadId } = await pair();
    await h.post(a, threadId);
    await h.call('GET', `/api/threads/${threadId}/messages`, { key: b.key });
    const [entry] = (await h.call('GET', '/api/deliveries', { key: b.key })).body.data;
    expect((await h.call('POST', `/api/deliveries/${entry.deliveryId}/delivered`, { key: b.key })).status).toBe(200);
    const [row] = await h.db.sql`select step, delivered_at is not null as reported from deliveries where id = ${entry.deliveryId}`;
    expect({ ...row }).toEqual({ step: 'fetched', reported: true });
  });

  test('404 for the sender, a stranger, a malformed or unknown id; nothing written', async () => {
    const { a, b, threadId } = await pair();
    const stranger = await h.agent(uniqueName('stranger'));
    await h.post(a, threadId);
    const [entry] = (await h.call('GET', '/api/deliveries', { key: b.key })).body.data;
    for (const [who, id] of [
      [a, entry.deliveryId],
      [stranger, entry.deliveryId],
      [b, 'nope'],
      [b, '../threads'],
      [b, '01a1ff80-d963-77fb-8efa-675ab5c7dfaa'],
    ] as const) {
      for (const action of ['delivered', 'acknowledge']) {
        const res = await h.call('POST', `/api/deliveries/${id}/${action}`, { key: who.key });
        expect(res.status).toBe(404);
        expect(res.body.success).toBe(false);
      }
    }
    const res = await h.call('POST', `/api/deliveries/${entry.deliveryId}/delivered`, { key: stranger.key });
    expect(res.body).toEqual(NO_DELIVERY);
    const [row] = await h.db.sql`select step, delivered_at, acknowledged_at from deliveries where id = ${entry.deliveryId}`;
    expect({ ...row }).toEqual({ step: 'accepted', delivered_at: null, acknowledged_at: null });
  });
});

describe('oneLine', () => {
  test('summary first, else the first non-blank line, cut with an ellipsis', () => {
    expect(oneLine('Short', 'ignored', 120)).toBe('Short');
    expect(oneLine(null, '\n\n  first   line \nsecond', 120)).toBe('first line');
    expect(oneLine(null, 'y'.repeat(130), 120)).toBe(`${'y'.repeat(119)}…`);
    expect(oneLine(null, 'y'.repeat(130), 120)).toHaveLength(120);
  });
});

describe('concurrent repeats', () => {
  test('of two racing delivered reports, both answer the time that is stored', async () => {
    const { a, b, threadId } = await pair();
    await h.post(a, threadId);
    const [entry] = (await h.call('GET', '/api/deliveries', { key: b.key })).body.data;
    // Hold the row locked, as a first report still in flight would, while a second one queues.
    const held = h.db.sql.reserve();
    const conn = await held;
    await conn`begin`;
    await conn`update deliveries set delivered_at = now(), step = 'delivered' where id = ${entry.deliveryId}`;
    const [first] = await conn`select delivered_at from deliveries where id = ${entry.deliveryId}`;
    const second = h.call('POST', `/api/deliveries/${entry.deliveryId}/delivered`, { key: b.key });
    // Committed only once the second report is queued behind the lock, so the race is run every time.
    await eventually(async () => {
      const [queued] = await h.db.sql`
        select 1 from pg_stat_activity
        where datname = current_database() and wait_event_type = 'Lock' and query ilike '%update deliveries%'`;
      return queued;
    });
    await conn`commit`;
    conn.release();
    const res = await second;
    expect(res.status).toBe(200);
    expect(res.body.data.deliveredAt).toBe((first!.delivered_at as Date).toISOString());
    const [stored] = await h.db.sql`select delivered_at from deliveries where id = ${entry.deliveryId}`;
    expect((stored!.delivered_at as Date).toISOString()).toBe(res.body.data.deliveredAt);
  });
});

describe('resend', () => {
  const fail = (id: string) => h.db.sql`update deliveries set step = 'failed', failed_step = 'accepted', error = 'HTTP 500' where id = ${id}`;

  test('is refused, and nothing changes, when the doorbell could never go out', async () => {
    const { resendDelivery } = await import('../src/domain/deliveries/delivery-steps');
    const { setArchived } = await import('../src/domain/agents/agents');
    const { confirmClose } = await import('../src/domain/threads/threads');
    const cases: [string, (ctx: { b: { username: string }; threadId: string; a: { key: string } }) => Promise<unknown>][] = [
      ['its recipient is archived', ({ b }) => setArchived(h.db.sql, BY_CLI, b.username, true)],
      ['its recipient has left the thread', ({ b, threadId }) =>
        h.db.sql`delete from participants where thread_id = ${threadId} and agent_id = (select id from agents where username = ${b.username})`],
      ['its thread is closed', async ({ a, threadId }) => {
        await h.call('POST', `/api/threads/${threadId}/close`, { key: a.key });
        await confirmClose(h.db.sql, BY_CLI, threadId);
      }],
    ];
    for (const [reason, make] of cases) {
      const { a, b, threadId } = await pair();
      const posted = await h.post(a, threadId);
      const [d] = await h.db.sql`select id from deliveries where message_id = ${posted.id}`;
      await fail(d!.id);
      await make({ a, b, threadId });
      await expect(resendDelivery(h.db.sql, BY_CLI, d!.id)).rejects.toThrow(`This delivery cannot be resent: ${reason}.`);
      const [row] = await h.db.sql`select step, failed_step from deliveries where id = ${d!.id}`;
      expect({ ...row }).toEqual({ step: 'failed', failed_step: 'accepted' });
    }
  });
});
