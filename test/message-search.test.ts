import { beforeAll, describe, expect, test } from 'bun:test';
import { indexOlderMessages } from '../src/domain/messages/message-search';
import { confirmClose, removeParticipant } from '../src/domain/threads/threads';
import { toolList } from '../src/mcp/tools';
import { uniqueName, useHarness, useListening, type TestAgent } from './support/harness';
import { mcpClient } from './support/mcp-client';
import { BY_CLI } from '../src/domain/people/audit';

// Full-text search for agents: GET /api/messages/search and the MCP tool search_messages, over
// the threads the agent can see and nothing else, recording no read.
const h = useHarness();
const at = useListening(h);
let alice: TestAgent;
let bob: TestAgent;
let carol: TestAgent;
let stranger: TestAgent;
let shared: string;


const search = (key: string, query: Record<string, string>) => h.call('GET', `/api/messages/search?${new URLSearchParams(query)}`, { key });
const ids = (res: { body: any }) => (res.body.data.results as { messageId: string }[]).map((r) => r.messageId);
const post = async (sender: TestAgent, threadId: string, content: string, summary?: string) => {
  const res = await h.call('POST', `/api/threads/${threadId}/messages`, { key: sender.key, body: { content, summary } });
  expect(res.status).toBe(201);
  return res.body.data.id as string;
};

beforeAll(async () => {
  alice = await h.agent(uniqueName('alice'));
  bob = await h.agent(uniqueName('bob'));
  carol = await h.agent(uniqueName('carol'));
  stranger = await h.agent(uniqueName('stranger'));
  shared = await h.thread(alice, [bob], 'Billing');
});

describe('what a search finds', () => {
  test('words in the content, the summary or the title, whatever their case or accents, with the result the schema names', async () => {
    const long = `We looked at several options.\n\nIn the end we agreed that the Invoice format is PDF, one line per item. ${'More detail follows. '.repeat(12)}`;
    const byContent = await post(alice, shared, long, 'Decision on billing');
    const bySummary = await post(bob, shared, 'see attached', 'Résumé of the quarter');
    const titled = await h.thread(alice, [bob], 'Quarterly zeppelin review');
    const byTitle = await post(alice, titled, 'first notes');

    const found = await search(bob.key, { q: 'invoice FORMAT' });
    expect(found.status).toBe(200);
    const [hit] = found.body.data.results;
    expect(found.body.data).toEqual({ results: [hit], next: null });
    expect(hit).toEqual({
      messageId: byContent,
      threadId: shared,
      threadTitle: 'Billing',
      sender: alice.username,
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      summary: 'Decision on billing',
      excerpt: expect.stringContaining('agreed that the **Invoice** **format** is PDF'),
    });
    expect(hit.excerpt).not.toContain('\n');
    expect(Array.from(hit.excerpt as string).length).toBeLessThanOrEqual(300);

    expect(ids(await search(alice.key, { q: 'resume' }))).toEqual([bySummary]);
    expect(ids(await search(alice.key, { q: 'ZEPPELIN' }))).toEqual([byTitle]);
    // A short message without a summary is summed up by its first line, as in the inbox.
    const [titleHit] = (await search(bob.key, { q: 'zeppelin' })).body.data.results;
    expect(titleHit).toMatchObject({ threadTitle: 'Quarterly zeppelin review', summary: 'first notes', excerpt: 'first notes' });
  });

  test('words of any language, accents folded', async () => {
    const thread = await h.thread(alice, [bob], 'Languages');
    const german = await post(alice, thread, 'Die Größe der Rechnung');
    const russian = await post(alice, thread, 'Счёт-фактура готов');
    const greek = await post(alice, thread, 'Το τιμολόγιο εστάλη');
    const q = async (text: string) => ids(await search(bob.key, { q: text, threadId: thread }));
    expect(await q('grosse rechnung')).toEqual([german]);
    expect(await q('GRÖSSE')).toEqual([german]);
    expect(await q('счет')).toEqual([russian]);
    expect(await q('ΤΙΜΟΛΟΓΙΟ')).toEqual([greek]);
  });

  test('phrases, exclusions and or, in websearch syntax; words are whole words', async () => {
    const thread = await h.thread(alice, [bob], 'Syntax');
    const both = await post(alice, thread, 'the blue whale sings');
    const apart = await post(alice, thread, 'a whale that is blue');
    const other = await post(alice, thread, 'a green lobster');
    const q = async (text: string) => ids(await search(bob.key, { q: text, threadId: thread })).toSorted();

    expect(await q('blue whale')).toEqual([both, apart].toSorted());
    expect(await q('"blue whale"')).toEqual([both]);
    expect(await q('whale -sings')).toEqual([apart]);
    expect(await q('lobster or sings')).toEqual([both, other].toSorted());
    expect(await q('wha')).toEqual([]);
    // An unclosed quote is a phrase to the end; punctuation around words is ignored.
    expect(await q('"blue whale')).toEqual([both]);
    expect(await q('...lobster!!!')).toEqual([other]);
  });

  test('a message written by a statement of its own (as an older release posts during an upgrade) is found as well', async () => {
    const thread = await h.thread(alice, [bob], 'Direct');
    const [row] = await h.db.sql`
      insert into messages (thread_id, sender_agent_id, sender, content)
      select ${thread}, id, username, 'quokka sighting' from agents where username = ${alice.username}
      returning id`;
    expect(ids(await search(bob.key, { q: 'quokka' }))).toEqual([row!.id]);
  });
});

describe('messages from before search', () => {
  test('the worker indexes, in batches, the messages an upgrade found, up to where the migration stood, and then says it is done', async () => {
    const thread = await h.thread(alice, [bob], 'Before search');
    const older = [await post(alice, thread, 'an axolotl came'), await post(bob, thread, 'axolotl again'), await post(alice, thread, 'third axolotl')];
    // As the migration leaves a database that had messages: none of them indexed, the walk to go.
    await h.db.sql`delete from message_search`;
    await h.db.sql`update message_search_backfill set up_to = (select id from messages order by id desc limit 1), indexed_through = null, done_at = null`;
    expect(ids(await search(bob.key, { q: 'axolotl' }))).toEqual([]);
    // Posted after the migration: indexed by its own insert, and not again by the walk.
    const newer = await post(alice, thread, 'a new axolotl');
    const total = (await h.db.sql`select count(*)::int as n from messages`)[0]!.n as number;

    const first = await indexOlderMessages(h.db.sql, 0, 2);
    expect(first).toEqual({ indexed: 2, done: false });
    expect(await indexOlderMessages(h.db.sql, 60_000, 2)).toEqual({ indexed: total - 1 - 2, done: true });
    expect(await indexOlderMessages(h.db.sql, 60_000, 2)).toEqual({ indexed: 0, done: true });
    expect((await h.db.sql`select count(*)::int as n from message_search`)[0]!.n).toBe(total);
    expect(ids(await search(bob.key, { q: 'axolotl' })).toSorted()).toEqual([...older, newer].toSorted());
    const [walk] = await h.db.sql`select indexed_through = up_to as through, done_at is not null as done from message_search_backfill`;
    expect(walk).toEqual({ through: true, done: true });
  });
});

describe('who sees what', () => {
  test('a stranger, a removed participant and anyone in a closed thread find nothing there; another thread of theirs stays searchable', async () => {
    const thread = await h.thread(alice, [bob, carol], 'Secret plans');
    const message = await post(alice, thread, 'the narwhal protocol');
    const own = await h.thread(carol, [stranger], 'Elsewhere');
    const elsewhere = await post(stranger, own, 'narwhal sighted elsewhere');

    expect(ids(await search(bob.key, { q: 'narwhal' }))).toEqual([message]);
    expect(ids(await search(carol.key, { q: 'narwhal' }))).toEqual([elsewhere, message]);
    expect(ids(await search(stranger.key, { q: 'narwhal' }))).toEqual([elsewhere]);
    expect(ids(await search(stranger.key, { q: 'secret plans' }))).toEqual([]);

    await removeParticipant(h.db.sql, BY_CLI, thread, carol.username);
    expect(ids(await search(carol.key, { q: 'narwhal' }))).toEqual([elsewhere]);
    expect(ids(await search(bob.key, { q: 'narwhal' }))).toEqual([message]);

    await h.db.sql`update threads set close_requested_at = now(), state = 'close-pending' where id = ${thread}`;
    expect(ids(await search(bob.key, { q: 'narwhal' }))).toEqual([message]);
    await confirmClose(h.db.sql, BY_CLI, thread);
    for (const agent of [alice, bob]) expect(ids(await search(agent.key, { q: 'narwhal' }))).toEqual([]);

    // Naming a thread one cannot see is answered as every door answers it.
    const notFound = { success: false, error: 'No such thread, or you are not a participant.' };
    for (const [key, threadId] of [[bob.key, thread], [stranger.key, shared], [bob.key, 'not-an-id'], [bob.key, '01a1ff80-d963-77fb-8efa-675ab5c7dfaa']] as const) {
      const res = await search(key, { q: 'narwhal', threadId });
      expect([res.status, res.body]).toEqual([404, notFound]);
    }
    expect((await h.call('GET', '/api/messages/search?q=narwhal')).status).toBe(401);
  });

  test('searching records no read: every delivery stays where it was, and the inbox still says unread', async () => {
    const thread = await h.thread(alice, [bob], 'Unread');
    const message = await post(alice, thread, 'the pangolin report');
    expect(ids(await search(bob.key, { q: 'pangolin' }))).toEqual([message]);
    const client = await mcpClient(at.base, bob.key);
    try {
      expect((await client.call('search_messages', { q: 'pangolin' })).data.results.map((r: any) => r.messageId)).toEqual([message]);
    } finally {
      await client.close();
    }
    const deliveries = await h.db.sql`select step, fetched_at, delivered_at from deliveries where message_id = ${message}`;
    expect([...deliveries]).toEqual([{ step: 'accepted', fetched_at: null, delivered_at: null }]);
    const inbox = await h.call('GET', '/api/deliveries', { key: bob.key });
    expect(inbox.body.data.find((e: any) => e.messageId === message)).toMatchObject({ alreadyRead: false });
  });
});

describe('ranking and paging', () => {
  test('the best match first (title over summary over content, fewer words around it first), the newer first among equals; each result read once across pages', async () => {
    const thread = await h.thread(alice, [bob], 'Ranking');
    const inContent = await post(alice, thread, 'a long message that mentions the okapi only once, among many other words that say nothing much at all');
    const inSummary = await post(alice, thread, 'nothing here', 'okapi');
    const older = await post(alice, thread, 'okapi okapi');
    const newer = await post(alice, thread, 'okapi okapi');
    const titled = await h.thread(alice, [bob], 'Okapi matters');
    const inTitle = await post(alice, titled, 'unrelated');

    const expected = [inTitle, inSummary, newer, older, inContent];
    expect(ids(await search(bob.key, { q: 'okapi' }))).toEqual(expected);

    const pages: string[][] = [];
    let after = '';
    for (;;) {
      const res = await search(bob.key, { q: 'okapi', limit: '2', ...(after ? { after } : {}) });
      expect(res.status).toBe(200);
      pages.push(ids(res));
      if (res.body.data.next === null) break;
      after = res.body.data.next;
    }
    expect(pages).toEqual([expected.slice(0, 2), expected.slice(2, 4), expected.slice(4)]);
    // A message posted between two pages takes its place among those not read yet; none is read twice.
    const first = (await search(bob.key, { q: 'okapi', limit: '2' })).body.data.next;
    const later = await post(alice, thread, 'okapi okapi');
    const second = (await search(bob.key, { q: 'okapi', limit: '2', after: first })).body.data;
    expect(second.results.map((r: any) => r.messageId)).toEqual([later, newer]);
    expect(ids(await search(bob.key, { q: 'okapi', after: second.next }))).toEqual([older, inContent]);
    expect(ids(await search(bob.key, { q: 'okapi', limit: '1' }))).toEqual([inTitle]);
    expect(ids(await search(bob.key, { q: 'okapi' }))).toEqual([inTitle, inSummary, later, newer, older, inContent]);
    // A limit is read as every list reads it: unparseable means the default.
    expect(ids(await search(bob.key, { q: 'okapi', limit: 'many' }))).toHaveLength(6);
  });
});

describe('odd input', () => {
  test('a clear 400 for what cannot be searched, an empty result for what finds nothing, never a 500', async () => {
    const refused = async (query: Record<string, string>, error: string) => {
      const res = await search(bob.key, query);
      expect([query, res.status, res.body]).toEqual([query, 400, { success: false, error }]);
    };
    const required = 'q is required: the words to search for';
    const noWords = 'q has no words to search for: give at least one word that is not excluded with -';
    await refused({}, required);
    await refused({ q: '' }, required);
    await refused({ q: '   ' }, required);
    await refused({ q: 'x'.repeat(201) }, 'q must be at most 200 characters');
    await refused({ q: '!!! ... ???' }, noWords);
    await refused({ q: '"' }, noWords);
    await refused({ q: '""' }, noWords);
    await refused({ q: "'" }, noWords);
    await refused({ q: '\\' }, noWords);
    await refused({ q: '🦘' }, noWords);
    await refused({ q: '-okapi' }, noWords);
    await refused({ q: '-okapi -zebra' }, noWords);
    await refused({ q: 'okapi\u0000' }, 'The request URL must not contain the NUL character (%00).');
    await refused({ q: 'okapi', after: 'page-2' }, 'after must be the next value of the previous page');
    await refused({ q: 'okapi', after: '0.5_not-an-id' }, 'after must be the next value of the previous page');
    // Numbers a rank (a PostgreSQL real) can never be.
    for (const rank of ['1e-50', '9'.repeat(50)]) {
      await refused({ q: 'okapi', after: `${rank}_01a1ff80-d963-77fb-8efa-675ab5c7dfaa` }, 'after must be the next value of the previous page');
    }

    for (const q of ['x'.repeat(200), 'é'.repeat(200), 'a & b | c ! d <-> e', "o'brien:* (x)", 'or', 'or or or okapi']) {
      const res = await search(bob.key, { q });
      expect([q, res.status, res.body.success]).toEqual([q, 200, true]);
    }
    expect((await search(bob.key, { q: 'no such words anywhere' })).body).toEqual({ success: true, data: { results: [], next: null } });
  });

  test('a cursor whose rank underflows a real (reads back as zero or a denormal) is a 400 over HTTP and MCP, not a database error', async () => {
    const badCursor = 'after must be the next value of the previous page';
    for (const rank of ['1e-999', '1e-40', '0.0000000000000000000000000000000000000000001', '5e-39']) {
      const after = `${rank}_01a1ff80-d963-77fb-8efa-675ab5c7dfaa`;
      const res = await search(bob.key, { q: 'okapi', after });
      expect([rank, res.status, res.body]).toEqual([rank, 400, { success: false, error: badCursor }]);
    }
    const client = await mcpClient(at.base, bob.key);
    try {
      expect(await client.call('search_messages', { q: 'okapi', after: '1e-999_01a1ff80-d963-77fb-8efa-675ab5c7dfaa' })).toEqual({ error: badCursor });
    } finally {
      await client.close();
    }
    // A rank of zero, and the smallest normal real, are ranks PostgreSQL can answer.
    for (const rank of ['0', '0.0', '1.1754944e-38']) {
      const res = await search(bob.key, { q: 'okapi', after: `${rank}_01a1ff80-d963-77fb-8efa-675ab5c7dfaa` });
      expect([rank, res.status]).toEqual([rank, 200]);
    }
  });

  test('the MCP tool answers the same sentences, and its annotations say it only reads', async () => {
    const client = await mcpClient(at.base, bob.key);
    try {
      expect(await client.call('search_messages', { q: '-okapi' })).toEqual({
        error: 'q has no words to search for: give at least one word that is not excluded with -',
      });
      expect(await client.call('search_messages', { q: 'okapi', threadId: 'nope' })).toEqual({ error: 'No such thread, or you are not a participant.' });
      const viaHttp = (await search(bob.key, { q: 'okapi', limit: '3' })).body.data;
      expect((await client.call('search_messages', { q: 'okapi', limit: 3 })).data).toEqual(viaHttp);
    } finally {
      await client.close();
    }
    expect(toolList.find((t) => t.name === 'search_messages')!.annotations).toEqual({
      title: 'Search messages',
      readOnlyHint: true,
      idempotentHint: true,
      destructiveHint: false,
      openWorldHint: false,
    });
  });
});
