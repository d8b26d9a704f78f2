import { describe, expect, test } from 'bun:test';
import type { ReservedSql } from 'postgres';
import { setArchived } from '../src/domain/agents/agents';
import { invitePerson, type Person } from '../src/domain/people/people';
import { markActive } from '../src/domain/threads/activity';
import { confirmClose, declineClose, removeParticipant } from '../src/domain/threads/threads';
import { uniqueName, useHarness, useListening, type Reply, type TestAgent } from './support/harness';
import { mcpClient } from './support/mcp-client';
import { EMOJI } from './support/emoji';
import { BY_CLI, byPerson } from '../src/domain/people/audit';

const h = useHarness();
const at = useListening(h);
// U+1F600, one character of two UTF-16 code units.
const NO_THREAD = { success: false, error: 'No such thread, or you are not a participant.' };

describe('open a thread', () => {
  test('201 with the caller added, duplicates and the caller folded in', async () => {
    const a = await h.agent(uniqueName('open'));
    const b = await h.agent(uniqueName('open'));
    const res = await h.call('POST', '/api/threads', {
      key: a.key,
      body: { title: 'Plan', goal: 'Agree', participantUsernames: [b.username, b.username, a.username] },
    });
    expect(res.status).toBe(201);
    expect(res.body.success).toBe(true);
    const t = res.body.data;
    expect(t).toEqual({
      id: expect.any(String),
      title: 'Plan',
      goal: 'Agree',
      state: 'open',
      openedBy: a.username,
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      participants: [{ username: a.username }, { username: b.username }],
    });
    const [count] = await h.db.sql`select count(*)::int as n from participants where thread_id = ${t.id}`;
    expect(count!.n).toBe(2);
  });

  test('participantUsernames is optional and goal defaults to null', async () => {
    const a = await h.agent(uniqueName('solo'));
    const res = await h.call('POST', '/api/threads', { key: a.key, body: { title: 'Alone' } });
    expect(res.status).toBe(201);
    expect(res.body.data.goal).toBeNull();
    expect(res.body.data.participants).toEqual([{ username: a.username }]);
  });

  test.each([
    [{}, 'title is required'],
    [{ title: '' }, 'title must not be empty'],
    [{ title: 'x'.repeat(201) }, 'title must be at most 200 characters'],
    [{ title: 7 }, 'title must be a string'],
    [{ title: 'ok', goal: 'g'.repeat(2001) }, 'goal must be at most 2000 characters'],
    [{ title: 'ok', participantUsernames: 'bob' }, 'participantUsernames must be an array'],
    [{ title: 'ok', participantUsernames: [1] }, 'participantUsernames.0 must be a string'],
    [[], 'body must be a JSON object'],
    [null, 'body must be a JSON object'],
  ])('400 for %j', async (body, error) => {
    const a = await h.agent(uniqueName('bad'));
    const res = await h.call('POST', '/api/threads', { key: a.key, body });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ success: false, error });
    const [count] = await h.db.sql`select count(*)::int as n from threads t join agents a on a.id = t.opened_by where a.username = ${a.username}`;
    expect(count!.n).toBe(0);
  });

  test('the bounds themselves are accepted', async () => {
    const a = await h.agent(uniqueName('edge'));
    const res = await h.call('POST', '/api/threads', { key: a.key, body: { title: 't'.repeat(200), goal: 'g'.repeat(2000) } });
    expect(res.status).toBe(201);
  });

  test('lengths are counted in code points: 200 emoji are a title of 200 characters, 201 are too many', async () => {
    const a = await h.agent(uniqueName('emoji'));
    const open = (body: unknown) => h.call('POST', '/api/threads', { key: a.key, body });
    const accepted = await open({ title: EMOJI.repeat(200), goal: EMOJI.repeat(2000) });
    expect(accepted.status).toBe(201);
    const [stored] = await h.db.sql`select title, goal from threads where id = ${accepted.body.data.id}`;
    expect(stored).toEqual({ title: EMOJI.repeat(200), goal: EMOJI.repeat(2000) });
    for (const [body, error] of [
      [{ title: EMOJI.repeat(201) }, 'title must be at most 200 characters'],
      [{ title: 'ok', goal: EMOJI.repeat(2001) }, 'goal must be at most 2000 characters'],
    ] as const) {
      const res = await open(body);
      expect([res.status, res.body]).toEqual([400, { success: false, error }]);
    }
    const [count] = await h.db.sql`select count(*)::int as n from threads t join agents a on a.id = t.opened_by where a.username = ${a.username}`;
    expect(count!.n).toBe(1);
  });

  test('400 naming an unknown or archived participant, and nothing is created', async () => {
    const a = await h.agent(uniqueName('names'));
    const gone = await h.agent(uniqueName('gone'));
    await setArchived(h.db.sql, BY_CLI, gone.username, true);
    for (const name of ['nobody-here', gone.username]) {
      const res = await h.call('POST', '/api/threads', { key: a.key, body: { title: 'x', participantUsernames: [name] } });
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ success: false, error: `participantUsernames names ${name}, which is not an active agent` });
    }
    const [count] = await h.db.sql`select count(*)::int as n from threads t join agents a on a.id = t.opened_by where a.username = ${a.username}`;
    expect(count!.n).toBe(0);
  });
});

describe('list and get', () => {
  test('lists only threads the caller is in, newest first', async () => {
    const a = await h.agent(uniqueName('lister'));
    const b = await h.agent(uniqueName('lister'));
    const first = await h.thread(a, [b], 'first');
    const second = await h.thread(b, [a], 'second');
    await h.thread(b, [], 'not mine');
    const res = await h.call('GET', '/api/threads', { key: a.key });
    expect(res.status).toBe(200);
    expect(res.body.data.map((t: { id: string }) => t.id)).toEqual([second, first]);
  });

  test('paged with limit and after, newest first, over HTTP and MCP; without them every thread; a bad after is 400', async () => {
    const a = await h.agent(uniqueName('pager'));
    const b = await h.agent(uniqueName('pager'));
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.unshift(await h.thread(a, [b], `Paged ${i}`));
    const page = async (query: string) => {
      const res = await h.call('GET', `/api/threads${query}`, { key: a.key });
      expect(res.status).toBe(200);
      return (res.body.data as { id: string }[]).map((t) => t.id);
    };
    expect(await page('')).toEqual(ids);
    expect(await page('?limit=2')).toEqual(ids.slice(0, 2));
    expect(await page(`?limit=2&after=${ids[1]}`)).toEqual(ids.slice(2, 4));
    expect(await page(`?limit=2&after=${ids[3]}`)).toEqual(ids.slice(4));
    // after alone pages with the default limit; an unparseable limit means the default.
    expect(await page(`?after=${ids[0]}`)).toEqual(ids.slice(1));
    expect(await page('?limit=lots')).toEqual(ids);
    const bad = await h.call('GET', '/api/threads?after=yesterday', { key: a.key });
    expect([bad.status, bad.body]).toEqual([400, { success: false, error: 'after must be a threadId from the thread list' }]);

    const mcp = await mcpClient(at.base, a.key);
    try {
      const listed = await mcp.call('list_threads', { limit: 2, after: ids[0] });
      expect(listed.data.threads.map((t: { id: string }) => t.id)).toEqual(ids.slice(1, 3));
      expect(await mcp.call('list_threads', { after: 'yesterday' })).toEqual({ error: 'after must be a threadId from the thread list' });
    } finally {
      await mcp.close();
    }
  });

  test('get returns the thread to a participant and 404 to a stranger or for a bad id', async () => {
    const a = await h.agent(uniqueName('get'));
    const stranger = await h.agent(uniqueName('stranger'));
    const id = await h.thread(a, []);
    const mine = await h.call('GET', `/api/threads/${id}`, { key: a.key });
    expect(mine.status).toBe(200);
    expect(mine.body.data.id).toBe(id);
    for (const path of [`/api/threads/${id}`, '/api/threads/not-an-id', '/api/threads/01a1ff80-d963-77fb-8efa-675ab5c7dfaa', "/api/threads/1'%20or%20'1'='1"]) {
      const res = await h.call('GET', path, { key: stranger.key });
      expect(res.status).toBe(404);
      expect(res.body).toEqual(NO_THREAD);
    }
  });
});

describe('participants', () => {
  test('adding gives the history, deliveries only for later messages, and repeats change nothing', async () => {
    const a = await h.agent(uniqueName('adder'));
    const b = await h.agent(uniqueName('early'));
    const c = await h.agent(uniqueName('late'));
    const id = await h.thread(a, [b]);
    await h.post(a, id, 'before c joined');
    const added = await h.call('POST', `/api/threads/${id}/participants`, { key: a.key, body: { username: c.username } });
    expect(added.status).toBe(200);
    expect(added.body.data.participants).toEqual([{ username: a.username }, { username: b.username }, { username: c.username }]);
    const again = await h.call('POST', `/api/threads/${id}/participants`, { key: b.key, body: { username: c.username } });
    expect(again.status).toBe(200);
    expect(again.body.data.participants).toHaveLength(3);
    expect((await h.call('GET', '/api/deliveries', { key: c.key })).body.data).toEqual([]);
    const history = await h.call('GET', `/api/threads/${id}/messages`, { key: c.key });
    expect(history.body.data.map((m: { content: string }) => m.content)).toEqual(['before c joined']);
    const after = await h.post(a, id, 'after c joined');
    expect(after.recipients).toBe(2);
    const inbox = await h.call('GET', '/api/deliveries', { key: c.key });
    expect(inbox.body.data.map((e: { messageId: string }) => e.messageId)).toEqual([after.id]);
  });

  test('400 for an unknown agent or a bad body, 404 for a stranger', async () => {
    const a = await h.agent(uniqueName('adder'));
    const stranger = await h.agent(uniqueName('stranger'));
    const id = await h.thread(a, []);
    const unknown = await h.call('POST', `/api/threads/${id}/participants`, { key: a.key, body: { username: 'no-such-agent' } });
    expect(unknown.status).toBe(400);
    expect(unknown.body).toEqual({ success: false, error: 'username names no-such-agent, which is not an active agent' });
    const missing = await h.call('POST', `/api/threads/${id}/participants`, { key: a.key, body: {} });
    expect(missing.status).toBe(400);
    expect(missing.body).toEqual({ success: false, error: 'username is required' });
    const foreign = await h.call('POST', `/api/threads/${id}/participants`, { key: stranger.key, body: { username: stranger.username } });
    expect(foreign.status).toBe(404);
    expect(foreign.body).toEqual(NO_THREAD);
    const [count] = await h.db.sql`select count(*)::int as n from participants where thread_id = ${id}`;
    expect(count!.n).toBe(1);
  });
  test('400 naming an archived agent, 404 once the thread is closed, and nothing is added', async () => {
    const a = await h.agent(uniqueName('adder'));
    const gone = await h.agent(uniqueName('gone'));
    const late = await h.agent(uniqueName('late'));
    await setArchived(h.db.sql, BY_CLI, gone.username, true);
    const id = await h.thread(a, []);
    const archived = await h.call('POST', `/api/threads/${id}/participants`, { key: a.key, body: { username: gone.username } });
    expect(archived.status).toBe(400);
    expect(archived.body).toEqual({ success: false, error: `username names ${gone.username}, which is not an active agent` });
    await h.call('POST', `/api/threads/${id}/close`, { key: a.key });
    await confirmClose(h.db.sql, BY_CLI, id);
    const closed = await h.call('POST', `/api/threads/${id}/participants`, { key: a.key, body: { username: late.username } });
    expect(closed.status).toBe(404);
    expect(closed.body).toEqual(NO_THREAD);
    const [count] = await h.db.sql`select count(*)::int as n from participants where thread_id = ${id}`;
    expect(count!.n).toBe(1);
  });
});

describe('adding a participant while the thread changes', () => {
  const lockWaiters = async () =>
    (await h.db.sql`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`)[0]!
      .n as number;
  async function until(condition: () => Promise<boolean>) {
    const end = Date.now() + 5000;
    while (!(await condition())) {
      if (Date.now() > end) throw new Error('condition not met in time');
      await Bun.sleep(5);
    }
  }
  let operator: Person | undefined;
  const operatorDecider = async () => {
    if (!operator) {
      await invitePerson(h.db.sql, BY_CLI, { email: 'operator@example.com', username: 'operator' });
      [operator] = await h.db.sql<Person[]>`select id, email, username from people where username = 'operator'`;
    }
    return byPerson(operator!);
  };

  type Race = {
    // Readies the thread and returns the change, which checks its own answer.
    prepare: (threadId: string, caller: TestAgent) => Promise<() => Promise<void>>;
    // Run by a second connection in a transaction, to stop the add at its write after everything
    // it checks, and to let the change run to its commit meanwhile, as far as the add allows.
    hold: (holder: ReservedSql, joining: TestAgent) => Promise<unknown>;
  };
  const races: [string, Race][] = [
    [
      'a person confirms its close',
      {
        prepare: async (threadId, caller) => {
          await h.call('POST', `/api/threads/${threadId}/close`, { key: caller.key });
          return async () => expect(await confirmClose(h.db.sql, BY_CLI, threadId)).toEqual({ id: threadId, state: 'closed' });
        },
        // Stops the insert before it locks any row.
        hold: (holder) => holder`lock table participants in share mode`,
      },
    ],
    [
      'a person removes the caller',
      {
        prepare: async (threadId, caller) => {
          const person = await operatorDecider();
          return async () => {
            const thread = await removeParticipant(h.db.sql, person, threadId, caller.username);
            expect(thread.participants).not.toContainEqual({ username: caller.username });
          };
        },
        // Stops the insert at its foreign key check on the agent it adds; holding the table
        // instead would stop the removal too.
        hold: (holder, joining) => holder`select 1 from agents where username = ${joining.username} for update`,
      },
    ],
  ];

  // The add holds the thread and the caller's place in it from its check to its commit, so it
  // completes as checked and the change waits for it: a request answered 404 never leaves a
  // participant behind, and none joins a thread after it closed.
  test.each(races)('%s meanwhile: the add completes first, then the change', async (_change, race) => {
    const caller = await h.agent(uniqueName('racer'));
    const other = await h.agent(uniqueName('racer'));
    const joining = await h.agent(uniqueName('joining'));
    const threadId = await h.thread(caller, [other]);
    const change = await race.prepare(threadId, caller);

    const holder = await h.db.sql.reserve();
    let added: Promise<Reply> | undefined;
    let changed: Promise<void> | undefined;
    try {
      await holder`begin`;
      await race.hold(holder, joining);
      added = h.call('POST', `/api/threads/${threadId}/participants`, { key: caller.key, body: { username: joining.username } });
      await until(async () => (await lockWaiters()) === 1);
      let settled = false;
      changed = change().finally(() => void (settled = true));
      await until(async () => settled || (await lockWaiters()) === 2);
    } finally {
      await holder`commit`;
      holder.release();
    }
    const [answer] = await Promise.all([added, changed]);
    expect(answer!.status).toBe(200);
    expect(answer!.body.data.participants).toEqual([{ username: caller.username }, { username: other.username }, { username: joining.username }]);
    const [joined] = await h.db.sql`
      select count(*)::int as n from participants p join agents a on a.id = p.agent_id
      where p.thread_id = ${threadId} and a.username = ${joining.username}`;
    expect(joined!.n).toBe(1);
  });
});

describe('closing', () => {
  test('only the opener may ask (403), the request is recorded, a repeat is a no-op', async () => {
    const a = await h.agent(uniqueName('opener'));
    const b = await h.agent(uniqueName('other'));
    const id = await h.thread(a, [b]);
    const refused = await h.call('POST', `/api/threads/${id}/close`, { key: b.key });
    expect(refused.status).toBe(403);
    expect(refused.body).toEqual({ success: false, error: 'Only the agent that opened this thread may ask to close it.' });
    const asked = await h.call('POST', `/api/threads/${id}/close`, { key: a.key });
    expect(asked.status).toBe(200);
    expect(asked.body.data.state).toBe('close-pending');
    const [first] = await h.db.sql`select state, close_requested_at from threads where id = ${id}`;
    const repeat = await h.call('POST', `/api/threads/${id}/close`, { key: a.key });
    expect(repeat.status).toBe(200);
    expect(repeat.body.data.state).toBe('close-pending');
    const [second] = await h.db.sql`select state, close_requested_at from threads where id = ${id}`;
    expect(second).toEqual(first!);
  });

  test('while pending: sending is 400, reading and acknowledging still work', async () => {
    const a = await h.agent(uniqueName('opener'));
    const b = await h.agent(uniqueName('other'));
    const id = await h.thread(a, [b]);
    await h.post(a, id, 'last words');
    await h.call('POST', `/api/threads/${id}/close`, { key: a.key });
    for (const sender of [a, b]) {
      const res = await h.call('POST', `/api/threads/${id}/messages`, { key: sender.key, body: { content: 'more' } });
      expect(res.status).toBe(400);
      expect(res.body).toEqual({
        success: false,
        error: 'The thread is closing: a close was requested and awaits a person, so sending is rejected.',
      });
    }
    const [count] = await h.db.sql`select count(*)::int as n from messages where thread_id = ${id}`;
    expect(count!.n).toBe(1);
    expect((await h.call('GET', `/api/threads/${id}`, { key: b.key })).status).toBe(200);
    const inbox = await h.call('GET', '/api/deliveries', { key: b.key });
    expect(inbox.body.data).toHaveLength(1);
    const listing = await h.call('GET', `/api/threads/${id}/messages`, { key: b.key });
    expect(listing.body.data.map((m: { content: string }) => m.content)).toEqual(['last words']);
    const ack = await h.call('POST', `/api/deliveries/${inbox.body.data[0].deliveryId}/acknowledge`, { key: b.key });
    expect(ack.status).toBe(200);
  });

  test('a person confirms: the thread is 404, unlisted and out of the inbox for agents', async () => {
    const a = await h.agent(uniqueName('opener'));
    const b = await h.agent(uniqueName('other'));
    const id = await h.thread(a, [b]);
    const posted = await h.post(a, id);
    await h.call('POST', `/api/threads/${id}/close`, { key: a.key });
    expect(await confirmClose(h.db.sql, BY_CLI, id)).toEqual({ id, state: 'closed' });
    expect(await confirmClose(h.db.sql, BY_CLI, id)).toEqual({ id, state: 'closed' });
    for (const who of [a, b]) {
      const get = await h.call('GET', `/api/threads/${id}`, { key: who.key });
      expect(get.status).toBe(404);
      expect(get.body).toEqual(NO_THREAD);
      expect((await h.call('GET', `/api/threads/${id}/messages`, { key: who.key })).status).toBe(404);
      expect((await h.call('GET', '/api/threads', { key: who.key })).body.data).toEqual([]);
    }
    expect((await h.call('GET', '/api/deliveries', { key: b.key })).body.data).toEqual([]);
    const [delivery] = await h.db.sql`select id from deliveries where message_id = ${posted.id}`;
    expect((await h.call('POST', `/api/deliveries/${delivery!.id}/delivered`, { key: b.key })).status).toBe(404);
  });

  test('a person declines: the thread is open again and sending works', async () => {
    const a = await h.agent(uniqueName('opener'));
    const b = await h.agent(uniqueName('other'));
    const id = await h.thread(a, [b]);
    await h.call('POST', `/api/threads/${id}/close`, { key: a.key });
    expect(await declineClose(h.db.sql, BY_CLI, id)).toEqual({ id, state: 'open' });
    expect((await h.post(a, id)).recipients).toBe(1);
    await expect(declineClose(h.db.sql, BY_CLI, id)).rejects.toThrow('The thread has no pending close request (it is open).');
    await expect(confirmClose(h.db.sql, BY_CLI, id)).rejects.toThrow('The thread has no pending close request (it is open).');
  });

  test('404 for a stranger asking to close', async () => {
    const a = await h.agent(uniqueName('opener'));
    const stranger = await h.agent(uniqueName('stranger'));
    const id = await h.thread(a, []);
    const res = await h.call('POST', `/api/threads/${id}/close`, { key: stranger.key });
    expect(res.status).toBe(404);
    expect(res.body).toEqual(NO_THREAD);
  });
});

describe('last activity', () => {
  // How far behind now a thread's last activity is after a post's mark, when it was `ago` behind
  // before: in one transaction, whose clock (now()) stands still, so that the gap is exactly as set.
  async function lagAfterPost(threadId: string, ago: string): Promise<number> {
    return h.db.sql.begin(async (tx) => {
      await tx`update threads set last_activity_at = now() - ${ago}::interval where id = ${threadId}`;
      await tx`${markActive(tx, tx`select ${threadId}::uuid`)}`;
      const [row] = await tx<{ lag: number }[]>`select (extract(epoch from now() - last_activity_at) * 1000)::int as lag from threads where id = ${threadId}`;
      return row!.lag;
    });
  }

  test('a post moves a busy thread once its last activity is over a tenth of a second old, not before', async () => {
    const threadId = await h.thread(await h.agent(uniqueName('busy')), [await h.agent(uniqueName('busy'))], 'Busy');
    const lags = [];
    for (const ago of ['99 milliseconds', '100 milliseconds', '101 milliseconds', '1 hour']) lags.push(await lagAfterPost(threadId, ago));
    expect(lags).toEqual([99, 100, 0, 0]);
  });
});
