import { describe, expect, test } from 'bun:test';
import { runCommand } from '../src/cli/commands';
import { setContact, setContactPolicy } from '../src/domain/agents/contact-policy';
import { setArchived } from '../src/domain/agents/agents';
import { BY_CLI } from '../src/domain/people/audit';
import { useDashboardHarness } from './support/dashboard';
import { mcpClient } from './support/mcp-client';
import { useListening, type TestAgent } from './support/harness';

// The directory at every door: profiles set by the agent (API), by people (dashboard, CLI, with
// the audit record), found by words and tags with PostgreSQL's text search, and shown only to
// callers the listed agent's contact policy admits (HTTP, MCP); the A2A card reads the same profile.
const h = useDashboardHarness();
const server = useListening(h);

const cli = (...argv: string[]) => runCommand({ sql: h.db.sql, config: h.config }, argv);
const find = async (caller: TestAgent, query = '') => h.call('GET', `/api/agents${query}`, { key: caller.key });
const names = async (caller: TestAgent, query = '') => {
  const res = await find(caller, query);
  expect(res.status).toBe(200);
  return (res.body.data.agents as { username: string }[]).map((a) => a.username);
};

let n = 0;
const agents = async <N extends string[]>(...names: N) =>
  (await Promise.all(names.map((name) => h.agent(`dir-${name}-${++n}`)))) as { [K in keyof N]: TestAgent };

describe('profiles', () => {
  test('an agent sets its own profile, reads it back, and a bad one is refused naming the field', async () => {
    const [me] = await agents('me');
    const empty = await h.call('GET', '/api/agents/me/profile', { key: me.key });
    expect(empty.body).toEqual({ success: true, data: { username: me.username, displayName: null, description: null, tags: [], updatedAt: null } });
    const set = await h.call('PUT', '/api/agents/me/profile', {
      key: me.key,
      body: { displayName: ' Migration reviewer ', description: 'Reviews PostgreSQL migrations for locks.', tags: ['sql', 'Postgres', 'sql'] },
    });
    expect(set.status).toBe(200);
    expect(set.body.data).toMatchObject({ username: me.username, displayName: 'Migration reviewer', description: 'Reviews PostgreSQL migrations for locks.', tags: ['postgres', 'sql'] });
    expect(typeof set.body.data.updatedAt).toBe('string');
    expect((await h.call('GET', '/api/agents/me/profile', { key: me.key })).body.data).toEqual(set.body.data);

    const badTag = await h.call('PUT', '/api/agents/me/profile', { key: me.key, body: { tags: ['has space'] } });
    expect([badTag.status, badTag.body]).toEqual([400, { success: false, error: 'tags.0 must be letters, digits, "+", "#", ".", "_" or "-", starting with a letter or digit' }]);
    const tooLong = await h.call('PUT', '/api/agents/me/profile', { key: me.key, body: { displayName: 'x'.repeat(101) } });
    expect([tooLong.status, tooLong.body.error]).toEqual([400, 'displayName must be at most 100 characters']);
    const tooMany = await h.call('PUT', '/api/agents/me/profile', { key: me.key, body: { tags: Array.from({ length: 21 }, (_, i) => `t${i}`) } });
    expect([tooMany.status, tooMany.body.error]).toEqual([400, 'tags must have at most 20 items']);
    expect((await h.call('GET', '/api/agents/me/profile', { key: me.key })).body.data).toEqual(set.body.data);
    expect((await h.call('PUT', '/api/agents/me/profile', { body: {} })).status).toBe(401);
  });

  test('people set it on the dashboard and with the CLI, on the record; a field left out is cleared', async () => {
    const [bot] = await agents('bot');
    await h.invite('dir-owner@example.com', 'dir-owner');
    const cookie = await h.signIn('dir-owner@example.com');
    const res = await h.send('PUT', `/dashboard/api/agents/${bot.username}/profile`, { cookie, body: { displayName: 'Bot', description: 'Answers billing questions', tags: ['billing'] } });
    expect([res.status, res.body.data.tags]).toEqual([200, ['billing']]);
    const unknown = await h.send('PUT', '/dashboard/api/agents/no-such-agent/profile', { cookie, body: {} });
    expect([unknown.status, unknown.body.error]).toEqual([404, 'No agent named no-such-agent.']);
    const listed = await h.send('GET', `/dashboard/api/agents?q=${bot.username}`, { cookie });
    expect(listed.body.data.items[0]).toMatchObject({ username: bot.username, profile: { displayName: 'Bot', description: 'Answers billing questions', tags: ['billing'] }, presence: { online: false, lastSeenAt: null } });

    const byCli = (await cli('agents', 'profile', bot.username, '--description', 'Invoices', '--tags', 'billing, invoices')) as { displayName: string | null; tags: string[] };
    expect([byCli.displayName, byCli.tags]).toEqual([null, ['billing', 'invoices']]);
    const records = await h.db.sql<{ actor: string; before: unknown; after: unknown }[]>`
      select actor, before, after from audit_events where action = 'agent.profile.set' and subject = ${bot.username} order by id`;
    expect([...records]).toEqual([
      { actor: 'dir-owner', before: { displayName: null, description: null, tags: [] }, after: { displayName: 'Bot', description: 'Answers billing questions', tags: ['billing'] } },
      { actor: 'cli', before: { displayName: 'Bot', description: 'Answers billing questions', tags: ['billing'] }, after: { displayName: null, description: 'Invoices', tags: ['billing', 'invoices'] } },
    ]);
  });
});

describe('the directory', () => {
  test('finds agents by words in names, descriptions and tags, and by tag, paged in username order', async () => {
    const [caller, sql, docs, other] = await agents('caller', 'sql', 'docs', 'other');
    const pg = `pg${n}`;
    await h.call('PUT', '/api/agents/me/profile', { key: sql.key, body: { displayName: 'Query doctor', description: 'Reviews SQL and résumés plans', tags: [pg] } });
    await h.call('PUT', '/api/agents/me/profile', { key: docs.key, body: { description: 'Writes the documentation', tags: ['writing', pg] } });
    expect(await names(caller, '?q=sql')).toContain(sql.username);
    expect(await names(caller, '?q=sql')).not.toContain(docs.username);
    expect(await names(caller, '?q=resumes')).toEqual([sql.username]);
    expect(await names(caller, '?q=doctor')).toEqual([sql.username]);
    expect(await names(caller, `?q=${other.username}`)).toEqual([other.username]);
    expect(await names(caller, `?tag=${pg.toUpperCase()}`)).toEqual([docs.username, sql.username].toSorted());
    expect(await names(caller, `?tag=${pg}&q=documentation`)).toEqual([docs.username]);
    expect(await names(caller, '?q=nothing-like-this-anywhere')).toEqual([]);

    const first = await find(caller, `?tag=${pg}&limit=1`);
    expect(first.body.data.agents.length).toBe(1);
    expect(first.body.data.next).toBe(first.body.data.agents[0].username);
    const second = await find(caller, `?tag=${pg}&limit=1&after=${first.body.data.next}`);
    expect([second.body.data.agents.length, second.body.data.next]).toEqual([1, null]);
    expect(second.body.data.agents[0].username > first.body.data.agents[0].username).toBe(true);
    expect(second.body.data.agents[0]).toEqual({
      username: expect.any(String),
      displayName: expect.anything(),
      description: expect.any(String),
      tags: expect.any(Array),
      updatedAt: expect.any(String),
      presence: { online: false, lastSeenAt: null },
    });

    const noWords = await find(caller, '?q=-sql');
    expect([noWords.status, noWords.body.error]).toEqual([400, 'q has no words to search for: give at least one word that is not excluded with -']);
    const badAfter = await find(caller, '?after=Not%20a%20name');
    expect([badAfter.status, badAfter.body.error]).toEqual([400, 'after must be lowercase letters, digits, ".", "_" or "-", starting with a letter or digit']);
    expect((await h.call('GET', '/api/agents')).status).toBe(401);
  });

  test('lists only the agents the caller may reach: not closed ones, not those blocking it, contacts only when allowed or sharing a thread', async () => {
    const [caller, open, closed, blocking, contacts, allowing, sharing, archived] = await agents('caller', 'open', 'closed', 'blocking', 'contacts', 'allowing', 'sharing', 'archived');
    const tag = `reach${n}`;
    for (const agent of [caller, open, closed, blocking, contacts, allowing, sharing, archived]) {
      await h.call('PUT', '/api/agents/me/profile', { key: agent.key, body: { tags: [tag] } });
    }
    await setContactPolicy(h.db.sql, BY_CLI, closed.username, 'closed');
    await setContact(h.db.sql, BY_CLI, blocking.username, caller.username, 'block');
    for (const agent of [contacts, allowing, sharing]) await setContactPolicy(h.db.sql, BY_CLI, agent.username, 'contacts');
    await setContact(h.db.sql, BY_CLI, allowing.username, caller.username, 'allow');
    await h.thread(sharing, [caller]);
    await setArchived(h.db.sql, BY_CLI, archived.username, true);

    const expected = [open, allowing, sharing].map((a) => a.username).toSorted();
    expect(await names(caller, `?tag=${tag}`)).toEqual(expected);
    // Exactly those the caller can open a thread with.
    for (const agent of [open, closed, blocking, contacts, allowing, sharing]) {
      const opened = await h.call('POST', '/api/threads', { key: caller.key, body: { title: 'Reach', participantUsernames: [agent.username] } });
      expect([agent.username, opened.status === 201]).toEqual([agent.username, expected.includes(agent.username)]);
    }

    const mcp = await mcpClient(server.base, caller.key);
    try {
      const found = await mcp.call('find_agents', { tag });
      expect((found.data.agents as { username: string }[]).map((a) => a.username)).toEqual(expected);
      const byWords = await mcp.call('find_agents', { q: open.username });
      expect(byWords.data).toEqual({ agents: [expect.objectContaining({ username: open.username, tags: [tag], presence: { online: false, lastSeenAt: null } })], next: null });
      const hidden = await mcp.call('find_agents', { q: closed.username });
      expect(hidden.data).toEqual({ agents: [], next: null });
      const refused = await mcp.call('find_agents', { q: '-x' });
      expect(refused.error).toBe('q has no words to search for: give at least one word that is not excluded with -');
    } finally {
      await mcp.close();
    }
  });
});

test("the A2A card carries the profile's display name, description and a skill per tag", async () => {
  const [reader, owner] = await agents('reader', 'owner');
  const plain = await h.call('GET', `/a2a/agents/${owner.username}/.well-known/agent-card.json`, { key: reader.key });
  expect([plain.body.name, plain.body.skills.map((s: { id: string }) => s.id)]).toEqual([owner.username, ['messaging']]);
  await h.call('PUT', '/api/agents/me/profile', { key: owner.key, body: { displayName: 'Owner bot', description: 'Keeps the release calendar.', tags: ['calendar', 'releases'] } });
  const card = await h.call('GET', `/a2a/agents/${owner.username}/.well-known/agent-card.json`, { key: reader.key });
  expect(card.body.name).toBe('Owner bot');
  expect(card.body.description.startsWith('Keeps the release calendar.\n\n')).toBe(true);
  expect(card.body.skills.map((s: { id: string; name: string; tags: string[] }) => [s.id, s.name, s.tags])).toEqual([
    ['messaging', 'Messaging', ['messaging', 'mailbox', 'store-and-forward']],
    ['tag:calendar', 'calendar', ['calendar']],
    ['tag:releases', 'releases', ['releases']],
  ]);
});
