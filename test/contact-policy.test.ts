import { describe, expect, test } from 'bun:test';
import { runCommand } from '../src/cli/commands';
import { setContact, setContactPolicy } from '../src/domain/agents/contact-policy';
import { BY_CLI } from '../src/domain/people/audit';
import { useDashboardHarness } from './support/dashboard';
import { mcpClient } from './support/mcp-client';
import { useListening, type TestAgent } from './support/harness';
import { eventually } from './support/receiver';

// Who may put an agent in a thread, at every door, with a real database: the policy, the lists,
// the refusals (403 with a code, nothing written), the people's controls and their audit record,
// and the race between a change and an admission.
const h = useDashboardHarness();
const server = useListening(h);

const cli = (...argv: string[]) => runCommand({ sql: h.db.sql, config: h.config }, argv);
const policy = (agent: TestAgent, to: string) => setContactPolicy(h.db.sql, BY_CLI, agent.username, to);
const list = (agent: TestAgent, contact: TestAgent, which: 'allow' | 'block') => setContact(h.db.sql, BY_CLI, agent.username, contact.username, which);

const openWith = (opener: TestAgent, others: TestAgent[], headers: Record<string, string> = {}) =>
  h.call('POST', '/api/threads', { key: opener.key, body: { title: 'Hello', participantUsernames: others.map((o) => o.username) }, headers });
const add = (adder: TestAgent, threadId: string, other: TestAgent) =>
  h.call('POST', `/api/threads/${threadId}/participants`, { key: adder.key, body: { username: other.username } });

const contactsOnly = (name: string) => `${name} accepts threads only from its contacts; ask a person to add you to ${name}'s allow list. Nothing was written.`;
const peopleOnly = (name: string) => `${name} accepts threads only from people; ask a person to put it in the thread. Nothing was written.`;
const blocked = (name: string) => `${name} does not accept threads from you: you are on its block list, and only a person can take you off it; nothing was written.`;

// Everything an open or an add could have written, for the agent: threads it opened, participations.
const written = async (agent: TestAgent) => {
  const [row] = await h.db.sql<{ threads: number; participations: number; keys: number }[]>`
    select (select count(*)::int from threads t join agents a on a.id = t.opened_by where a.username = ${agent.username}) as threads,
           (select count(*)::int from participants p join agents a on a.id = p.agent_id where a.username = ${agent.username}) as participations,
           (select count(*)::int from idempotency_keys k join agents a on a.id = k.agent_id where a.username = ${agent.username}) as keys`;
  return row!;
};
const participantsOf = async (threadId: string) =>
  (await h.db.sql<{ username: string }[]>`
    select a.username from participants p join agents a on a.id = p.agent_id where p.thread_id = ${threadId} order by a.username`).map((r) => r.username);

let n = 0;
const agents = async <N extends string[]>(...names: N) =>
  (await Promise.all(names.map((name) => h.agent(`${name}-${++n}`)))) as { [K in keyof N]: TestAgent };

describe('the rule', () => {
  test('open (the default) admits any agent; contacts refuses a stranger with 403 contact_policy and writes nothing', async () => {
    const [alice, bob, carol] = await agents('alice', 'bob', 'carol');
    expect((await openWith(alice, [bob])).status).toBe(201);
    await policy(bob, 'contacts');
    const before = await written(carol);
    const refused = await openWith(carol, [bob]);
    expect([refused.status, refused.body]).toEqual([403, { success: false, error: contactsOnly(bob.username), code: 'contact_policy' }]);
    const keyed = await openWith(carol, [alice, bob], { 'idempotency-key': 'policy-key-1' });
    expect([keyed.status, keyed.body.code]).toEqual([403, 'contact_policy']);
    const own = await h.call('POST', '/api/threads', { key: carol.key, body: { title: 'Alone' } });
    expect(own.status).toBe(201);
    const addRefused = await add(carol, own.body.data.id, bob);
    expect([addRefused.status, addRefused.body]).toEqual([403, { success: false, error: contactsOnly(bob.username), code: 'contact_policy' }]);
    expect(await participantsOf(own.body.data.id)).toEqual([carol.username]);
    expect(await written(carol)).toEqual({ threads: before.threads + 1, participations: before.participations + 1, keys: 0 });
  });

  test('contacts admits an agent on the allow list, and one that already shares a thread, whatever its state', async () => {
    const [bob, friend, colleague, stranger] = await agents('bob', 'friend', 'colleague', 'stranger');
    // bob and colleague share a thread (a person closes it below), opened while bob was open.
    const shared = await h.thread(stranger, [bob, colleague]);
    await policy(bob, 'contacts');
    await list(bob, friend, 'allow');
    expect((await openWith(friend, [bob])).status).toBe(201);
    await h.db.sql`update threads set state = 'closed', closed_at = now() where id = ${shared}`;
    const opened = await openWith(colleague, [bob]);
    expect(opened.status).toBe(201);
    const alone = (await h.call('POST', '/api/threads', { key: friend.key, body: { title: 'Later' } })).body.data.id;
    expect((await add(friend, alone, bob)).status).toBe(200);
    expect(await participantsOf(alone)).toEqual([bob.username, friend.username].sort());
  });

  test('closed refuses every agent, allowed or not; a person adds it from the dashboard', async () => {
    const [bob, friend] = await agents('bob', 'friend');
    await list(bob, friend, 'allow');
    await policy(bob, 'closed');
    const refused = await openWith(friend, [bob]);
    expect([refused.status, refused.body]).toEqual([403, { success: false, error: peopleOnly(bob.username), code: 'contact_policy' }]);
    const threadId = await h.thread(friend, []);
    expect((await add(friend, threadId, bob)).body.code).toBe('contact_policy');
    await h.invite('closer@example.com', 'closer');
    const cookie = await h.signIn('closer@example.com');
    const byPerson = await h.send('POST', `/dashboard/api/threads/${threadId}/participants`, { cookie, body: { username: bob.username } });
    expect(byPerson.status).toBe(200);
    expect(await participantsOf(threadId)).toEqual([bob.username, friend.username].sort());
    // Now that they share a thread, adding bob again changes nothing and is no contact question.
    expect((await add(friend, threadId, bob)).status).toBe(200);
  });

  test('the block list wins over the allow list, an open policy and a shared thread', async () => {
    const [bob, pest, other] = await agents('bob', 'pest', 'other');
    await h.thread(pest, [bob]);
    await list(bob, pest, 'block');
    const refused = await openWith(pest, [other, bob]);
    expect([refused.status, refused.body]).toEqual([403, { success: false, error: blocked(bob.username), code: 'blocked' }]);
    await policy(bob, 'contacts');
    expect((await openWith(pest, [bob])).body.code).toBe('blocked');
    // A block list is one agent's: the others still admit the blocked agent.
    expect((await openWith(pest, [other])).status).toBe(201);
    await list(bob, pest, 'allow');
    expect((await openWith(pest, [bob])).status).toBe(201);
  });

  test('an agent opening a thread alone, or naming itself, asks nobody', async () => {
    const [bob] = await agents('bob');
    await policy(bob, 'closed');
    const res = await h.call('POST', '/api/threads', { key: bob.key, body: { title: 'Mine', participantUsernames: [bob.username] } });
    expect([res.status, res.body.data.participants]).toEqual([201, [{ username: bob.username }]]);
  });
});

describe('the agent reads its own policy', () => {
  test('GET /api/agents/me/contact-policy and the MCP tool get_contact_policy', async () => {
    const [bob, friend, pest] = await agents('bob', 'friend', 'pest');
    const fresh = await h.call('GET', '/api/agents/me/contact-policy', { key: bob.key });
    expect([fresh.status, fresh.body]).toEqual([200, { success: true, data: { policy: 'open', allow: [], block: [] } }]);
    await policy(bob, 'contacts');
    await list(bob, friend, 'allow');
    await list(bob, pest, 'block');
    const set = { policy: 'contacts', allow: [friend.username], block: [pest.username] };
    expect((await h.call('GET', '/api/agents/me/contact-policy', { key: bob.key })).body).toEqual({ success: true, data: set });
    expect((await h.call('GET', '/api/agents/me/contact-policy')).status).toBe(401);
    const mcp = await mcpClient(server.base, bob.key);
    try {
      expect((await mcp.client.callTool({ name: 'get_contact_policy', arguments: {} })).structuredContent).toEqual(set);
    } finally {
      await mcp.close();
    }
  });
});

describe('every door refuses with the code', () => {
  test('MCP: open_thread and add_participant answer the sentence with _meta.status 403 and the code', async () => {
    const [bob, pest] = await agents('bob', 'pest');
    await list(bob, pest, 'block');
    const mcp = await mcpClient(server.base, pest.key);
    try {
      const opened = await mcp.client.callTool({ name: 'open_thread', arguments: { title: 'Hi', participantUsernames: [bob.username] } });
      expect([opened.isError, opened.content, opened._meta]).toEqual([true, [{ type: 'text', text: blocked(bob.username) }], { status: 403, code: 'blocked' }]);
      const threadId = await h.thread(pest, []);
      const added = await mcp.client.callTool({ name: 'add_participant', arguments: { threadId, username: bob.username } });
      expect([added.isError, added._meta]).toEqual([true, { status: 403, code: 'blocked' }]);
      expect(await participantsOf(threadId)).toEqual([pest.username]);
    } finally {
      await mcp.close();
    }
  });

  test('A2A: SendMessage to a contacts-only agent is refused with the status and code in the error metadata, and sends nothing', async () => {
    const [bob, stranger] = await agents('bob', 'stranger');
    await policy(bob, 'contacts');
    const before = await written(stranger);
    const res = await h.call('POST', `/a2a/agents/${bob.username}`, {
      key: stranger.key,
      headers: { 'a2a-version': '1.0' },
      body: { jsonrpc: '2.0', id: 'c', method: 'SendMessage', params: { message: { messageId: 'policy-1', role: 'ROLE_USER', parts: [{ text: 'hello' }] } } },
    });
    expect(res.status).toBe(200);
    expect(res.body.error).toEqual({
      code: -32602,
      message: contactsOnly(bob.username),
      data: [
        {
          '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
          reason: 'INVALID_PARAMS',
          domain: 'a2a-protocol.org',
          metadata: { status: '403', code: 'contact_policy' },
        },
      ],
    });
    expect(await written(stranger)).toEqual(before);
    const [messages] = await h.db.sql`select count(*)::int as n from messages m join agents a on a.id = m.sender_agent_id where a.username = ${stranger.username}`;
    expect(messages!.n).toBe(0);
  });
});

describe("people's controls", () => {
  test('the dashboard API sets the policy and the lists, each with its audit entry', async () => {
    const [bob, friend, pest] = await agents('bob', 'friend', 'pest');
    await h.invite('governor@example.com', 'governor');
    const cookie = await h.signIn('governor@example.com');
    const base = `/dashboard/api/agents/${bob.username}`;
    const setPolicy = await h.send('PUT', `${base}/contact-policy`, { cookie, body: { policy: 'contacts' } });
    expect([setPolicy.status, setPolicy.body]).toEqual([200, { success: true, data: { username: bob.username, policy: 'contacts', allow: [], block: [] } }]);
    expect((await h.send('PUT', `${base}/contacts/${friend.username}`, { cookie, body: { list: 'allow' } })).status).toBe(200);
    expect((await h.send('PUT', `${base}/contacts/${pest.username}`, { cookie, body: { list: 'allow' } })).status).toBe(200);
    expect((await h.send('PUT', `${base}/contacts/${pest.username}`, { cookie, body: { list: 'block' } })).status).toBe(200);
    const listed = await h.send('GET', `${base}/contacts`, { cookie });
    expect(listed.body.data).toEqual({ username: bob.username, policy: 'contacts', allow: [friend.username], block: [pest.username] });
    expect((await h.send('DELETE', `${base}/contacts/${friend.username}`, { cookie })).body.data.allow).toEqual([]);

    const refusals = [
      [await h.send('PUT', `${base}/contact-policy`, { cookie, body: { policy: 'friends' } }), 400, 'policy must be one of open, contacts or closed'],
      [await h.send('PUT', `${base}/contacts/${friend.username}`, { cookie, body: { list: 'maybe' } }), 400, 'list must be allow or block'],
      [await h.send('PUT', `${base}/contacts/${bob.username}`, { cookie, body: { list: 'block' } }), 400, `An agent is on neither of its own lists; name another agent than ${bob.username}.`],
      [await h.send('PUT', `${base}/contacts/nobody-here`, { cookie, body: { list: 'block' } }), 404, 'No agent named nobody-here.'],
      [await h.send('DELETE', `${base}/contacts/${friend.username}`, { cookie }), 404, `${friend.username} is on neither of ${bob.username}'s lists.`],
      [await h.send('PUT', '/dashboard/api/agents/nobody-here/contact-policy', { cookie, body: { policy: 'open' } }), 404, 'No agent named nobody-here.'],
      [await h.send('GET', `${base}/contacts`), 401, null],
      [await h.send('PUT', `${base}/contact-policy`, { body: { policy: 'open' } }), 401, null],
    ] as const;
    for (const [res, status, sentence] of refusals) {
      expect(res.status).toBe(status);
      if (sentence) expect(res.body.error).toBe(sentence);
    }

    const audit = await h.db.sql`
      select actor, action, subject_type, subject, before, after from audit_events
      where subject = ${bob.username} and action like 'agent.contact%' order by at, id`;
    expect(audit.map((a) => ({ ...a }))).toEqual([
      { actor: 'governor', action: 'agent.contact_policy.set', subject_type: 'agent', subject: bob.username, before: { policy: 'open' }, after: { policy: 'contacts' } },
      { actor: 'governor', action: 'agent.contacts.allow', subject_type: 'agent', subject: bob.username, before: { contact: friend.username, list: null }, after: { contact: friend.username, list: 'allow' } },
      { actor: 'governor', action: 'agent.contacts.allow', subject_type: 'agent', subject: bob.username, before: { contact: pest.username, list: null }, after: { contact: pest.username, list: 'allow' } },
      { actor: 'governor', action: 'agent.contacts.block', subject_type: 'agent', subject: bob.username, before: { contact: pest.username, list: 'allow' }, after: { contact: pest.username, list: 'block' } },
      { actor: 'governor', action: 'agent.contacts.remove', subject_type: 'agent', subject: bob.username, before: { contact: friend.username, list: 'allow' }, after: { contact: friend.username, list: null } },
    ]);
  });

  test('the CLI: agents policy, contacts allow, block, remove and list, recorded as the CLI', async () => {
    const [bob, friend, pest] = await agents('bob', 'friend', 'pest');
    expect(await cli('agents', 'policy', bob.username, 'closed')).toEqual({ username: bob.username, policy: 'closed', allow: [], block: [] });
    await cli('contacts', 'allow', bob.username, friend.username);
    await cli('contacts', 'block', bob.username, pest.username);
    expect(await cli('contacts', 'list', bob.username)).toEqual({ username: bob.username, policy: 'closed', allow: [friend.username], block: [pest.username] });
    expect(await cli('contacts', 'remove', bob.username, pest.username)).toEqual({ username: bob.username, policy: 'closed', allow: [friend.username], block: [] });
    await expect(cli('agents', 'policy', bob.username, 'shut')).rejects.toThrow('policy must be one of open, contacts or closed');
    await expect(cli('contacts', 'list', 'nobody-here')).rejects.toThrow('No agent named nobody-here.');
    await expect(cli('contacts', 'allow', bob.username)).rejects.toThrow('Usage: contacts allow <username> <contact>');
    const audit = await h.db.sql`select actor, action from audit_events where subject = ${bob.username} and action like 'agent.contact%' order by at, id`;
    expect(audit.map((a) => `${a.actor} ${a.action}`)).toEqual([
      'cli agent.contact_policy.set',
      'cli agent.contacts.allow',
      'cli agent.contacts.block',
      'cli agent.contacts.remove',
    ]);
    const [policyRow] = await h.db.sql`select contact_policy from agents where username = ${bob.username}`;
    expect(policyRow!.contact_policy).toBe('closed');
  });
});

// The admission and a change of the rules it reads, at the same moment: whichever takes the
// agent's row first, the other waits for it, so the admission never decides on rules older than a
// change that committed first.
describe('a change and an admission at the same moment', () => {
  const waitingOnLocks = async (count: number) =>
    eventually(async () => (await h.db.sql`select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and datname = current_database()`)[0]!.n >= count);

  test('a block or a policy committed while an add or an open waits is seen: the add is refused', async () => {
    for (const change of ['block', 'closed'] as const) {
      for (const door of ['add', 'open'] as const) {
        const [bob, pest] = await agents('bob', 'pest');
        const threadId = await h.thread(pest, []);
        // Hold the change's transaction open after it took bob's row and wrote: its audit record waits.
        const lock = await h.db.sql.reserve();
        try {
          await lock`begin`;
          await lock`lock table audit_events in exclusive mode`;
          const changing = change === 'block' ? list(bob, pest, 'block') : policy(bob, 'closed');
          await waitingOnLocks(1);
          const admitting = door === 'add' ? add(pest, threadId, bob) : openWith(pest, [bob]);
          await waitingOnLocks(2);
          await lock`commit`;
          await changing;
          const answer = await admitting;
          expect([change, door, answer.status, answer.body.code]).toEqual([change, door, 403, change === 'block' ? 'blocked' : 'contact_policy']);
        } finally {
          lock.release();
        }
        expect(await participantsOf(threadId)).toEqual([pest.username]);
        expect((await written(pest)).participations).toBe(1);
      }
    }
  });

  test('two changes naming the same two agents at the same moment wait for each other, and neither deadlocks', async () => {
    const [ann, ben] = await agents('ann', 'ben');
    const lock = await h.db.sql.reserve();
    try {
      // Both changes have begun and wait to write their list entries.
      await lock`begin`;
      await lock`lock table agent_contacts in exclusive mode`;
      const changes = Promise.allSettled([list(ann, ben, 'block'), list(ben, ann, 'block')]);
      await waitingOnLocks(2);
      await lock`commit`;
      expect((await changes).map((c) => c.status)).toEqual(['fulfilled', 'fulfilled']);
    } finally {
      lock.release();
    }
    expect((await openWith(ann, [ben])).body.code).toBe('blocked');
  });

  test('an admission that took the row first commits before the block, which waits for it', async () => {
    for (const door of ['add', 'open'] as const) {
      const [bob, pest] = await agents('bob', 'pest');
      const threadId = await h.thread(pest, []);
      const lock = await h.db.sql.reserve();
      let blockedAt: Date | undefined;
      try {
        await lock`begin`;
        // The admission has checked under bob's row lock and now waits to write.
        await lock`lock table ${lock(door === 'add' ? 'participants' : 'threads')} in share row exclusive mode`;
        const admitting = door === 'add' ? add(pest, threadId, bob) : openWith(pest, [bob]);
        await waitingOnLocks(1);
        const blocking = list(bob, pest, 'block').then((r) => {
          blockedAt = new Date();
          return r;
        });
        await waitingOnLocks(2);
        await Bun.sleep(50);
        expect(blockedAt).toBeUndefined();
        await lock`commit`;
        expect((await admitting).status).toBe(door === 'add' ? 200 : 201);
        await blocking;
      } finally {
        lock.release();
      }
      expect((await written(bob)).participations).toBe(1);
      expect((await openWith(pest, [bob])).body.code).toBe('blocked');
    }
  });
});
