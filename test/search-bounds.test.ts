import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import postgres from 'postgres';
import { loadConfig } from '../src/config';
import { createAgent } from '../src/domain/agents/agents';
import { PER_CALLER, SEARCHES_UNDER_WAY, searchTooSlow } from '../src/domain/shared/search-gate';
import { silentLogger } from '../src/log';
import { createService, type HttpService } from '../src/service';
import { useDashboardHarness } from './support/dashboard';
import { privateCluster, type PrivateCluster } from './support/debian-postgres';
import { callApp, uniqueName, useListening, type Reply, type TestAgent } from './support/harness';
import { mcpClient } from './support/mcp-client';
import { eventually } from './support/receiver';
import { BY_CLI } from '../src/domain/people/audit';

// Searches are the reads whose cost a caller's words decide (domain/shared/search-gate.ts): each is
// bounded in time and memory, stops in the database when its client leaves, and shares the pool
// with everything else only up to SEARCH_CONCURRENCY.

const TIMEOUT_MS = 400;
const h = useDashboardHarness({ SEARCH_TIMEOUT_MS: String(TIMEOUT_MS), DB_POOL_SIZE: '10', SEARCH_CONCURRENCY: '4' });
const at = useListening(h);
let alice: TestAgent;
let bob: TestAgent;
let thread: string;
// A second connection that holds the search index locked, so that a search waits as long as a
// slow one runs: every statement of a search is bounded, lock waits included.
let locker: postgres.ReservedSql;
let admin: postgres.Sql;

const searchPath = (q: string) => `/api/messages/search?${new URLSearchParams({ q })}`;
const search = (key: string, q: string) => h.call('GET', searchPath(q), { key });
const searchesWaiting = async () => {
  const [row] = await admin<{ n: number }[]>`
    select count(*)::int as n from pg_stat_activity
    where datname = current_database() and state = 'active' and wait_event_type = 'Lock' and query like '%message_search ms%'`;
  return row!.n;
};

beforeAll(async () => {
  alice = await h.agent(uniqueName('alice'));
  bob = await h.agent(uniqueName('bob'));
  thread = await h.thread(alice, [bob], 'Search bounds');
  await h.post(alice, thread, 'the quarterly invoice format');
  admin = postgres(h.db.url, { max: 2, onnotice: () => {} });
  locker = await admin.reserve();
});

afterAll(async () => {
  locker.release();
  await admin.end();
});

async function holdingTheIndex<T>(run: () => Promise<T>): Promise<T> {
  await locker`begin`;
  await locker`lock table message_search in access exclusive mode`;
  try {
    return await run();
  } finally {
    await locker`rollback`;
  }
}

describe('time', () => {
  test('a search slower than SEARCH_TIMEOUT_MS is stopped in the database and answered 400, naming the bound and what to do; a quick one is not', async () => {
    await holdingTheIndex(async () => {
      const slow = await search(bob.key, 'invoice');
      expect(slow.status).toBe(400);
      expect(slow.body).toEqual({ success: false, error: searchTooSlow(TIMEOUT_MS) });
      expect(await searchesWaiting()).toBe(0);
    });
    const quick = await search(bob.key, 'invoice');
    expect(quick.status).toBe(200);
    expect(quick.body.data.results).toHaveLength(1);
  });

  test('the MCP tool answers the same sentence', async () => {
    const mcp = await mcpClient(at.base, bob.key);
    try {
      await holdingTheIndex(async () => {
        expect(await mcp.call('search_messages', { q: 'invoice' })).toEqual({ error: searchTooSlow(TIMEOUT_MS) });
      });
    } finally {
      await mcp.close();
    }
  });

  test("the dashboard's delivery and thread searches are bounded the same way; its lists without a search are not searches", async () => {
    await h.invite('ops@example.com', uniqueName('ops'));
    const cookie = await h.signIn('ops@example.com');
    await holdingTheIndex(async () => {
      const deliveries = await h.send('GET', '/dashboard/api/deliveries?q=invoice', { cookie });
      expect(deliveries.status).toBe(400);
      expect(deliveries.body).toEqual({ success: false, error: searchTooSlow(TIMEOUT_MS), code: 'invalid', field: 'q' });
      const failed = await h.send('GET', '/dashboard/api/deliveries/failed-in-view?q=invoice', { cookie });
      expect(failed.status).toBe(400);
      const unfiltered = await h.send('GET', '/dashboard/api/deliveries', { cookie });
      expect(unfiltered.status).toBe(200);
    });
  });
});

describe('presence', () => {
  test('a search whose client leaves stops in the database at once, not at its time bound', async () => {
    const service = await createService(
      loadConfig({ DATABASE_URL: h.db.url, DB_POOL_SIZE: '4', SEARCH_TIMEOUT_MS: '60000', WEBHOOK_ALLOW_LOCAL: 'true' }),
      { log: silentLogger, http: true, worker: false },
    );
    service.app.listen({ port: 0, hostname: '127.0.0.1' });
    try {
      await holdingTheIndex(async () => {
        const client = new AbortController();
        const asked = fetch(`http://127.0.0.1:${service.app.server!.port}${searchPath('invoice')}`, {
          headers: { authorization: `Bearer ${bob.key}` },
          signal: client.signal,
        }).catch((error: Error) => error.name);
        await eventually(async () => (await searchesWaiting()) === 1 || null);
        client.abort();
        expect(await asked).toBe('AbortError');
        // Well within the 60 s bound, and while the index is still held: only the cancel ends it.
        await eventually(async () => (await searchesWaiting()) === 0 || null, 5_000);
      });
    } finally {
      service.app.stop(true);
      await service.stop();
    }
  });
});

describe('share of the pool', () => {
  test('searches flooding in hold at most SEARCH_CONCURRENCY connections: the inbox answers meanwhile; a caller may have only so many under way, and past the queue they are refused with 503', async () => {
    // Bounds that let nothing end by time while the index is held.
    const service = await createService(
      loadConfig({ DATABASE_URL: h.db.url, DB_POOL_SIZE: '10', SEARCH_CONCURRENCY: '4', SEARCH_TIMEOUT_MS: '60000', WEBHOOK_ALLOW_LOCAL: 'true' }),
      { log: silentLogger, http: true, worker: false },
    );
    const ask = (key: string, path: string) => callApp(service.app, 'GET', path, { headers: { authorization: `Bearer ${key}` } });
    try {
      const others = await Promise.all(
        Array.from({ length: 40 }, async () => {
          const name = uniqueName('searcher');
          return (await createAgent(h.db.sql, BY_CLI, { username: name }, { allowLocal: true })).apiKey;
        }),
      );
      const settled: Reply[] = [];
      // Handed out of the hold in an object: a promise returned as it is would be waited for there.
      const { answering } = await holdingTheIndex(async () => {
        // Two each from four agents: four hold a connection (and wait for the index), four wait for a turn.
        const flood = others.slice(0, 4).flatMap((key) => [ask(key, searchPath('invoice')), ask(key, searchPath('invoice'))]);
        await eventually(async () => (await searchesWaiting()) === 4 || null);

        const third = await ask(others[0]!, searchPath('invoice'));
        expect(third.status).toBe(429);
        expect(third.body).toEqual({ success: false, error: SEARCHES_UNDER_WAY });
        expect(PER_CALLER).toBe(2);

        // Another agent's inbox has connections left while every search waits.
        const inbox = await ask(alice.key, '/api/deliveries');
        expect(inbox.status).toBe(200);
        expect(await searchesWaiting()).toBe(4);

        // The queue holds 8 per search allowed at once, 32: of 36 more, 28 wait and 8 are refused at once.
        const more = others.slice(4).map((key) => ask(key, searchPath('invoice')).then((r) => (settled.push(r), r)));
        await eventually(async () => settled.length === 8 || null);
        expect(settled.map((r) => [r.status, r.body, r.headers.get('retry-after')])).toEqual(
          Array.from({ length: 8 }, () => [503, { success: false, error: 'The service is busy with other searches. Retry in a moment.' }, '1']),
        );
        expect(await searchesWaiting()).toBe(4);
        return { answering: Promise.all([...flood, ...more]) };
      });
      // The index let go: every search that had a turn or waited for one is answered.
      const answered = await answering;
      expect(answered.map((r) => r.status).sort()).toEqual([...Array(36).fill(200), ...Array(8).fill(503)].sort());
    } finally {
      await service.stop();
    }
  });
});

// PostgreSQL 15's ts_headline takes time and memory exponential in the length of a phrase whose
// words repeat in the message (18 does not): excerpts are built without the phrase.
describe('on PostgreSQL 15', () => {
  let cluster: PrivateCluster;
  let service: HttpService;
  let agent: TestAgent;
  let own: string;

  beforeAll(async () => {
    // Far more than a search needs, and far less than the machine has.
    cluster = await privateCluster(15, { addressSpaceBytes: 1536 * 1024 * 1024 });
    service = await createService(loadConfig({ DATABASE_URL: cluster.url, DB_POOL_SIZE: '4' }), { log: silentLogger, http: true, worker: false });
    const created = await createAgent(service.sql, BY_CLI, { username: 'zz-poster' }, { allowLocal: false });
    agent = { username: 'zz-poster', key: created.apiKey };
    await createAgent(service.sql, BY_CLI, { username: 'zz-reader' }, { allowLocal: false });
    const opened = await callApp(service.app, 'POST', '/api/threads', {
      headers: { authorization: `Bearer ${agent.key}` },
      body: { title: 'Notes', participantUsernames: ['zz-reader'] },
    });
    own = opened.body.data.id;
    const posted = await callApp(service.app, 'POST', `/api/threads/${own}/messages`, {
      headers: { authorization: `Bearer ${agent.key}` },
      body: { content: 'zz '.repeat(3_300).trim(), summary: 'one word, many times' },
    });
    expect(posted.status).toBe(201);
  }, 60_000);

  afterAll(async () => {
    await service?.stop();
    await cluster?.stop();
  });

  test('a phrase of one repeated word, up to the longest q allows, answers within the search bound, its backend staying small', async () => {
    const [version] = await service.sql<{ server_version_num: string }[]>`show server_version_num`;
    expect(Number(version!.server_version_num)).toBeGreaterThanOrEqual(150000);
    expect(Number(version!.server_version_num)).toBeLessThan(160000);
    for (const words of [14, 66]) {
      const q = `"${Array(words).fill('zz').join(' ')}"`;
      expect(q.length).toBeLessThanOrEqual(200);
      const res = await callApp(service.app, 'GET', searchPath(q), { headers: { authorization: `Bearer ${agent.key}` } });
      expect(res.status).toBe(200);
      expect(res.body.data.results).toHaveLength(1);
      expect(res.body.data.results[0].excerpt).toStartWith('**zz** **zz**');
    }
    // Before excerpts left the phrase out, 14 words took a backend past 1.5 GB.
    const peakKb = cluster.peakBackendKb();
    console.log(`largest backend on PostgreSQL 15 after the searches: ${Math.round(peakKb / 1024)} MB resident at its peak`);
    expect(peakKb).toBeLessThan(64 * 1024);
  });
});
