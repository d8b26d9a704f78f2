import { describe, expect, test } from 'bun:test';
import { setArchived } from '../src/domain/agents/agents';
import { internalError } from '../src/web/envelope';
import { uniqueName, useHarness } from './support/harness';
import { POSTS_AT_BOUNDS, POSTS_PAST_BOUNDS } from './support/emoji';
import { BY_CLI } from '../src/domain/people/audit';

const h = useHarness();
// U+1F600, one character of two UTF-16 code units.

const countRows = async (threadId: string) => {
  const [row] = await h.db.sql`
    select (select count(*)::int from messages where thread_id = ${threadId}) as messages,
           (select count(*)::int from deliveries where thread_id = ${threadId}) as deliveries`;
  return row!;
};

describe('post a message', () => {
  test('201 with id, threadId, createdAt and recipients; one delivery per other participant', async () => {
    const [a, b, c] = await Promise.all(['p', 'p', 'p'].map((n) => h.agent(uniqueName(n))));
    const id = await h.thread(a!, [b!, c!]);
    const res = await h.call('POST', `/api/threads/${id}/messages`, { key: a!.key, body: { content: 'hi', summary: 'greeting' } });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      success: true,
      data: {
        id: expect.any(String),
        threadId: id,
        createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
        recipients: 2,
      },
    });
    const deliveries = await h.db.sql`
      select a.username, d.step, d.webhook, d.publish_attempts
      from deliveries d join agents a on a.id = d.recipient_id
      where d.message_id = ${res.body.data.id} order by a.username`;
    expect(deliveries.map((d) => ({ ...d }))).toEqual(
      [b!, c!].map((x) => ({ username: x.username, step: 'accepted', webhook: false, publish_attempts: 0 })).sort((x, y) => x.username.localeCompare(y.username)),
    );
    const [message] = await h.db.sql`select sender, content, summary from messages where id = ${res.body.data.id}`;
    expect({ ...message }).toEqual({ sender: a!.username, content: 'hi', summary: 'greeting' });
  });

  test('archived participants are not recipients', async () => {
    const [a, b, c] = await Promise.all(['arc', 'arc', 'arc'].map((n) => h.agent(uniqueName(n))));
    const id = await h.thread(a!, [b!, c!]);
    await setArchived(h.db.sql, BY_CLI, c!.username, true);
    const posted = await h.post(a!, id);
    expect(posted.recipients).toBe(1);
    expect((await countRows(id)).deliveries).toBe(1);
  });

  test('400 and nothing created when every other participant is archived, or there is nobody else', async () => {
    const [a, b] = await Promise.all(['lone', 'lone'].map((n) => h.agent(uniqueName(n))));
    const id = await h.thread(a!, [b!]);
    await setArchived(h.db.sql, BY_CLI, b!.username, true);
    const res = await h.call('POST', `/api/threads/${id}/messages`, { key: a!.key, body: { content: 'anyone?' } });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      success: false,
      error: 'Every other participant is archived, so the message would reach nobody; nothing was sent.',
    });
    expect(await countRows(id)).toEqual({ messages: 0, deliveries: 0 });
    const alone = await h.thread(a!, []);
    expect((await h.call('POST', `/api/threads/${alone}/messages`, { key: a!.key, body: { content: 'echo' } })).status).toBe(400);
    expect(await countRows(alone)).toEqual({ messages: 0, deliveries: 0 });
  });

  test.each([
    [{}, 'content is required'],
    [{ content: '' }, 'content must not be empty'],
    [{ content: 'x'.repeat(10_001), summary: 's' }, 'content must be at most 10000 characters'],
    [{ content: 'x', summary: 's'.repeat(201) }, 'summary must be at most 200 characters'],
    [{ content: 'x'.repeat(201) }, 'summary is required when content is longer than 200 characters; add one and resend'],
    [{ content: 'x'.repeat(201), summary: '   ' }, 'summary is required when content is longer than 200 characters; add one and resend'],
    [{ content: 5 }, 'content must be a string'],
  ])('400 for %#', async (body, error) => {
    const [a, b] = await Promise.all(['v', 'v'].map((n) => h.agent(uniqueName(n))));
    const id = await h.thread(a!, [b!]);
    const res = await h.call('POST', `/api/threads/${id}/messages`, { key: a!.key, body });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ success: false, error });
    expect(await countRows(id)).toEqual({ messages: 0, deliveries: 0 });
  });

  test('the bounds themselves are accepted', async () => {
    const [a, b] = await Promise.all(['edge', 'edge'].map((n) => h.agent(uniqueName(n))));
    const id = await h.thread(a!, [b!]);
    for (const body of [
      { content: 'x'.repeat(200) },
      { content: 'x'.repeat(10_000), summary: 's'.repeat(200) },
      { content: 'x' },
    ]) {
      expect((await h.call('POST', `/api/threads/${id}/messages`, { key: a!.key, body })).status).toBe(201);
    }
  });

  test('lengths are counted in code points: every bound holds with emoji, two UTF-16 units each', async () => {
    const [a, b] = await Promise.all(['emoji', 'emoji'].map((n) => h.agent(uniqueName(n))));
    const id = await h.thread(a!, [b!]);
    const post = (body: unknown) => h.call('POST', `/api/threads/${id}/messages`, { key: a!.key, body });
    for (const body of POSTS_AT_BOUNDS) {
      const res = await post(body);
      expect(res.status).toBe(201);
      const [stored] = await h.db.sql`select content, summary from messages where id = ${res.body.data.id}`;
      expect(stored).toEqual({ content: body.content, summary: body.summary ?? null });
    }
    for (const [body, error] of POSTS_PAST_BOUNDS) {
      const res = await post(body);
      expect([res.status, res.body]).toEqual([400, { success: false, error }]);
    }
    expect(await countRows(id)).toEqual({ messages: 2, deliveries: 2 });
  });

  test('404 for a stranger, a malformed id and an unknown thread; nothing created', async () => {
    const [a, b, stranger] = await Promise.all(['s', 's', 's'].map((n) => h.agent(uniqueName(n))));
    const id = await h.thread(a!, [b!]);
    for (const path of [`/api/threads/${id}/messages`, '/api/threads/x/messages', '/api/threads/01a1ff80-d963-77fb-8efa-675ab5c7dfaa/messages']) {
      const res = await h.call('POST', path, { key: stranger!.key, body: { content: 'psst' } });
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ success: false, error: 'No such thread, or you are not a participant.' });
    }
    expect(await countRows(id)).toEqual({ messages: 0, deliveries: 0 });
  });

  test('a stranger gets 404 before any rule about the body', async () => {
    const [a, b, stranger] = await Promise.all(['o', 'o', 'o'].map((n) => h.agent(uniqueName(n))));
    const id = await h.thread(a!, [b!]);
    await h.call('POST', `/api/threads/${id}/close`, { key: a!.key });
    const res = await h.call('POST', `/api/threads/${id}/messages`, { key: stranger!.key, body: { content: 'hi' } });
    expect(res.status).toBe(404);
  });

  test('webhook recipients get their doorbell job in the same transaction', async () => {
    const a = await h.agent(uniqueName('hooked'));
    const b = await h.agent(uniqueName('hooked'), { webhookUrl: 'http://127.0.0.1:9/hook' });
    const c = await h.agent(uniqueName('poller'));
    const id = await h.thread(a, [b, c]);
    const res = await h.call('POST', `/api/threads/${id}/messages`, {
      key: a.key,
      body: { content: '\n  Ship   it\ntoday' },
    });
    const posted = res.body.data;
    const deliveries = await h.db.sql`
      select d.id, d.webhook, d.publish_attempts from deliveries d where d.message_id = ${posted.id} order by d.webhook desc`;
    expect(deliveries.map((d) => [d.webhook, d.publish_attempts])).toEqual([[true, 1], [false, 0]]);
    const jobs = await h.db.sql`
      select t.identifier as task_identifier, j.payload, j.key, j.max_attempts
      from graphile_worker._private_jobs j join graphile_worker._private_tasks t on t.id = j.task_id
      where j.key like 'notify:%'`;
    const [hooked] = await h.db.sql`
      select id, webhook_url, (extract(epoch from webhook_set_at) * 1000000)::bigint::text as version from agents where username = ${b.username}`;
    // The notification as it stood at the post rides along, so that the worker can ring at once.
    const doorbell = {
      messageId: posted.id,
      threadId: id,
      threadTitle: 'A thread',
      sender: a.username,
      summary: 'Ship it',
      recipientId: hooked!.id,
      url: 'http://127.0.0.1:9/hook',
      webhookVersion: hooked!.version,
      // Never rotated: the secrets' version is empty.
      secretVersion: '',
      files: 0,
    };
    expect(jobs.map((j) => ({ ...j }))).toEqual([
      { task_identifier: 'notify', payload: { deliveryId: deliveries[0]!.id, doorbell }, key: `notify:${deliveries[0]!.id}`, max_attempts: 5 },
    ]);
  });

  test('the message and its deliveries commit together or not at all', async () => {
    const [a, b, c] = await Promise.all(['tx', 'tx', 'tx'].map((n) => h.agent(uniqueName(n))));
    const id = await h.thread(a!, [b!, c!]);
    // A fault on the second delivery row must take the message and the first delivery with it.
    await h.db.sql.unsafe(`
      create function fail_second_delivery() returns trigger language plpgsql as $$
      begin
        if (select count(*) from deliveries where message_id = new.message_id) >= 1 then
          raise exception 'injected fault';
        end if;
        return new;
      end $$;
      create trigger fail_second_delivery before insert on deliveries for each row execute function fail_second_delivery();`);
    try {
      const res = await h.call('POST', `/api/threads/${id}/messages`, { key: a!.key, body: { content: 'doomed' } });
      expect(res.status).toBe(500);
      expect(res.body).toEqual({ success: false, error: internalError(res.headers.get('x-request-id')!) });
      expect(await countRows(id)).toEqual({ messages: 0, deliveries: 0 });
    } finally {
      await h.db.sql.unsafe('drop trigger fail_second_delivery on deliveries; drop function fail_second_delivery();');
    }
    expect((await h.post(a!, id)).recipients).toBe(2);
  });
});

describe('concurrent posts', () => {
  // Posts that arrive together share one statement (src/db/batcher.ts); each keeps its own outcome.
  test('share statements under load, and each is answered and stored as if it were alone', async () => {
    const [a, b, stranger, gone] = await Promise.all(['many', 'many', 'many', 'many'].map((n) => h.agent(uniqueName(n))));
    const hooked = await h.agent(uniqueName('many'), { webhookUrl: 'http://127.0.0.1:9/hook' });
    const polled = await h.thread(a!, [b!]);
    const mixed = await h.thread(a!, [b!, hooked]);
    const closing = await h.thread(a!, [b!]);
    expect((await h.call('POST', `/api/threads/${closing}/close`, { key: a!.key })).status).toBe(200);
    const nobody = await h.thread(a!, [gone!]);
    await setArchived(h.db.sql, BY_CLI, gone!.username, true);
    const unknown = '01a20000-0000-7000-8000-000000000000';
    const plan = [
      ...Array.from({ length: 20 }, (_, i) => ({ key: a!.key, thread: polled, content: `polled ${i}`, status: 201 })),
      ...Array.from({ length: 20 }, (_, i) => ({ key: a!.key, thread: mixed, content: `mixed ${i}`, status: 201 })),
      ...Array.from({ length: 4 }, () => ({ key: a!.key, thread: closing, content: 'late', status: 400 })),
      ...Array.from({ length: 4 }, () => ({ key: a!.key, thread: nobody, content: 'hello?', status: 400 })),
      ...Array.from({ length: 4 }, () => ({ key: stranger!.key, thread: polled, content: 'let me in', status: 404 })),
      ...Array.from({ length: 4 }, () => ({ key: a!.key, thread: unknown, content: 'where', status: 404 })),
    ];
    const answers = await Promise.all(plan.map((p) => h.call('POST', `/api/threads/${p.thread}/messages`, { key: p.key, body: { content: p.content } })));
    expect(answers.map((r) => r.status)).toEqual(plan.map((p) => p.status));
    const stored = await h.db.sql<{ id: string; content: string; created_at: Date; deliveries: number; jobs: number }[]>`
      select m.id, m.content, m.created_at,
             (select count(*)::int from deliveries d where d.message_id = m.id) as deliveries,
             (select count(*)::int from graphile_worker._private_jobs j join deliveries d on j.key = 'notify:' || d.id
              where d.message_id = m.id) as jobs
      from messages m where m.thread_id in (${polled}, ${mixed}, ${closing}, ${nobody})`;
    const byId = new Map(stored.map((m) => [m.id, m]));
    plan.forEach((p, i) => {
      if (p.status !== 201) return;
      const message = byId.get(answers[i]!.body.data.id)!;
      expect(message.content).toBe(p.content);
      expect(answers[i]!.body.data).toMatchObject({ threadId: p.thread, recipients: p.thread === mixed ? 2 : 1 });
      expect([message.deliveries, message.jobs]).toEqual(p.thread === mixed ? [2, 1] : [1, 0]);
    });
    expect(stored).toHaveLength(40);
    // Messages committed by one statement share its transaction's time.
    expect(new Set(stored.map((m) => m.created_at.getTime())).size).toBeLessThan(40);
  });
});

describe('list messages', () => {
  test('the newest `limit` messages, oldest first, with bodies', async () => {
    const [a, b] = await Promise.all(['list', 'list'].map((n) => h.agent(uniqueName(n))));
    const id = await h.thread(a!, [b!]);
    for (let i = 1; i <= 5; i++) await h.post(a!, id, `m${i}`);
    const res = await h.call('GET', `/api/threads/${id}/messages?limit=3`, { key: b!.key });
    expect(res.status).toBe(200);
    expect(res.body.data.map((m: { content: string }) => m.content)).toEqual(['m3', 'm4', 'm5']);
    expect(res.body.data[0]).toEqual({
      id: expect.any(String),
      threadId: id,
      sender: a!.username,
      content: 'm3',
      summary: null,
      createdAt: expect.stringMatching(/Z$/),
      files: [],
    });
  });

  test('limit: default 50, cap 200, unparseable → default', async () => {
    const [a, b] = await Promise.all(['lim', 'lim'].map((n) => h.agent(uniqueName(n))));
    const id = await h.thread(a!, [b!]);
    await h.db.sql`
      insert into messages (thread_id, sender_agent_id, sender, content)
      select ${id}, a.id, a.username, 'bulk ' || n from agents a, generate_series(1, 210) n where a.username = ${a!.username}`;
    const sizes: Record<string, number> = {};
    for (const q of ['', '?limit=', '?limit=abc', '?limit=-3', '?limit=0', '?limit=2.5', '?limit=7', '?limit=200', '?limit=201', '?limit=99999']) {
      const res = await h.call('GET', `/api/threads/${id}/messages${q}`, { key: a!.key });
      expect(res.status).toBe(200);
      sizes[q] = res.body.data.length;
    }
    expect(sizes).toEqual({
      '': 50, '?limit=': 50, '?limit=abc': 50, '?limit=-3': 50, '?limit=0': 50, '?limit=2.5': 50,
      '?limit=7': 7, '?limit=200': 200, '?limit=201': 200, '?limit=99999': 200,
    });
  });

  test('records a read of every message returned, and only those', async () => {
    const [a, b] = await Promise.all(['read', 'read'].map((n) => h.agent(uniqueName(n))));
    const id = await h.thread(a!, [b!]);
    const first = await h.post(a!, id, 'old');
    const second = await h.post(a!, id, 'new');
    await h.call('GET', `/api/threads/${id}/messages?limit=1`, { key: b!.key });
    const inbox = await h.call('GET', '/api/deliveries', { key: b!.key });
    expect(inbox.body.data.map((e: { messageId: string; alreadyRead: boolean }) => [e.messageId, e.alreadyRead])).toEqual([
      [first.id, false],
      [second.id, true],
    ]);
    const steps = await h.db.sql`select step, fetched_at is not null as fetched from deliveries where thread_id = ${id} order by id`;
    expect(steps.map((s) => ({ ...s }))).toEqual([{ step: 'accepted', fetched: false }, { step: 'fetched', fetched: true }]);
  });

  test('404 for a stranger', async () => {
    const [a, stranger] = await Promise.all(['ls', 'ls'].map((n) => h.agent(uniqueName(n))));
    const id = await h.thread(a!, []);
    const res = await h.call('GET', `/api/threads/${id}/messages`, { key: stranger!.key });
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ success: false, error: 'No such thread, or you are not a participant.' });
  });
});
