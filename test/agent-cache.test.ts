import { afterAll, beforeAll, expect, test } from 'bun:test';
import { cacheAgents, type AgentCacheListener } from '../src/db/agent-cache';
import { connect, type Sql } from '../src/db/connect';
import { listenForInbox } from '../src/db/inbox-signal';
import { setArchived } from '../src/domain/agents/agents';
import { buildApp, type App } from '../src/app';
import { silentLogger } from '../src/log';
import { callApp, uniqueName, useHarness } from './support/harness';
import { BY_CLI } from '../src/domain/people/audit';

const h = useHarness();

async function until(condition: () => boolean | Promise<boolean>, ms = 5000) {
  const end = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await Bun.sleep(5);
  }
}

// A second server instance on the same database: its own connections, listener and cache.
let sql: Sql;
let cache: AgentCacheListener;
let other: App;
const events: string[] = [];
const listeners = async () =>
  (
    await h.db.sql`
      select pid from pg_stat_activity
      where datname = current_database() and pid <> pg_backend_pid() and query ilike 'listen%'`
  ).map((r) => r.pid as number);
let otherListener: number;

beforeAll(async () => {
  sql = connect(h.db.url, 2);
  cache = cacheAgents(sql, { ...silentLogger, info: (event) => void events.push(event) });
  const before = await listeners();
  await cache.start();
  [otherListener] = (await listeners()).filter((pid) => !before.includes(pid)) as [number];
  other = buildApp({ sql, config: h.config, log: silentLogger, inboxSignal: listenForInbox(sql, silentLogger), agentCache: cache });
});

afterAll(async () => {
  await cache.stop();
  await sql.end({ timeout: 1 });
});

const threadsOnOther = async (key: string) =>
  (await callApp(other, 'GET', '/api/threads', { headers: { authorization: `Bearer ${key}` } })).status;

test('archiving refuses the key at once on another instance that had it cached; unarchiving restores it', async () => {
  const a = await h.agent(uniqueName('cached'));
  expect(await threadsOnOther(a.key)).toBe(200);
  expect(cache.size()).toBe(1);

  await setArchived(h.db.sql, BY_CLI, a.username, true);
  await until(() => cache.size() === 0, 1000);
  expect(await threadsOnOther(a.key)).toBe(401);
  expect(cache.size()).toBe(0);

  await setArchived(h.db.sql, BY_CLI, a.username, false);
  expect(await threadsOnOther(a.key)).toBe(200);
});

test('a lookup answered before an eviction is not cached after it', async () => {
  const a = await h.agent(uniqueName('raced'));
  const since = cache.version();
  await setArchived(h.db.sql, BY_CLI, a.username, true);
  await until(() => cache.version() !== since, 1000);
  cache.remember('a-key-hash', { id: 'read-before-the-archive', username: a.username }, since);
  expect(cache.get('a-key-hash')).toBeUndefined();
});

// An archive that notifies nobody (triggers skipped), as one made while a listener was
// disconnected is for that listener.
const archiveUnheard = (username: string) =>
  h.db.sql.begin(async (tx) => {
    await tx`set local session_replication_role = replica`;
    await tx`update agents set archived_at = now() where username = ${username}`;
  });

const threadsOnHarness = async (key: string) => (await h.call('GET', '/api/threads', { key })).status;

// Whoever changes the row, the database notifies: no writer has to remember to.
test.each([
  ['archived', (username: string) => h.db.sql`update agents set archived_at = now() where username = ${username}`],
  ['whose key is revoked', (username: string) => h.db.sql`delete from agent_keys where agent_id = (select id from agents where username = ${username})`],
  ['deleted', (username: string) => h.db.sql`delete from agents where username = ${username}`],
])('an agent %s by plain SQL: the key its process had cached answers 401 once the change is heard', async (_change, change) => {
  const a = await h.agent(uniqueName('plain'));
  const cached = h.agentCache.size();
  expect(await threadsOnHarness(a.key)).toBe(200);
  expect(h.agentCache.size()).toBe(cached + 1);
  const since = h.agentCache.version();
  await change(a.username);
  await until(() => h.agentCache.version() !== since, 2000);
  const refused = await h.call('GET', '/api/threads', { key: a.key });
  expect(refused.status).toBe(401);
  expect(refused.body).toEqual({ success: false, error: 'The API key is not recognised or its agent is archived.' });
  expect(h.agentCache.size()).toBe(cached);
});

test('an entry older than its time to live is looked up again, even when no change was heard', async () => {
  const short = cacheAgents(sql, silentLogger, { ttlMs: 3000 });
  await short.start();
  try {
    const app = buildApp({ sql, config: h.config, log: silentLogger, inboxSignal: listenForInbox(sql, silentLogger), agentCache: short });
    const threads = async (key: string) => (await callApp(app, 'GET', '/api/threads', { headers: { authorization: `Bearer ${key}` } })).status;
    const a = await h.agent(uniqueName('expiring'));
    expect(await threads(a.key)).toBe(200);
    await archiveUnheard(a.username);
    expect(await threads(a.key)).toBe(200);
    await Bun.sleep(3100);
    expect(await threads(a.key)).toBe(401);
    expect(short.size()).toBe(0);
  } finally {
    await short.stop();
  }
});

test('the cache is emptied when its listener reconnects, since notifications may have been missed', async () => {
  const a = await h.agent(uniqueName('missed'));
  expect(await threadsOnOther(a.key)).toBe(200);
  // The cached answer stands until the reconnect.
  await archiveUnheard(a.username);
  expect(await threadsOnOther(a.key)).toBe(200);

  await h.db.sql`select pg_terminate_backend(${otherListener})`;
  await until(() => events.includes('agent_cache_listener_reconnected'));
  expect(cache.size()).toBe(0);
  expect(await threadsOnOther(a.key)).toBe(401);
});

test('the cache holds at most its size, dropping the least recently used', async () => {
  const small = cacheAgents(sql, silentLogger, { maxSize: 2 });
  await small.start();
  try {
    const agent = (n: number) => ({ id: `id-${n}`, username: `agent-${n}` });
    small.remember('k1', agent(1), small.version());
    small.remember('k2', agent(2), small.version());
    expect(small.get('k1')).toEqual(agent(1));
    small.remember('k3', agent(3), small.version());
    expect([small.get('k1'), small.get('k2'), small.get('k3')]).toEqual([agent(1), undefined, agent(3)]);
    expect(small.size()).toBe(2);
  } finally {
    await small.stop();
  }
});
