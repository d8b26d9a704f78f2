import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { cacheAgents } from '../src/db/agent-cache';
import { connect } from '../src/db/connect';
import { listenForInbox } from '../src/db/inbox-signal';
import { waitForInbox } from '../src/domain/deliveries/inbox-wait';
import { settlesWithin } from '../src/settles-within';
import type { Socket } from 'bun';
import { buildApp } from '../src/app';
import { silentLogger } from '../src/log';
import { useHarness } from './support/harness';
import { parkedWait } from './support/inbox';
import { mcpClient } from './support/mcp-client';

// Held requests beyond the default bound on one agent's (web/held-requests.ts): the tests below hold
// hundreds of one agent's waits to see them share reads.
const h = useHarness({ HELD_REQUESTS_PER_AGENT: '1000' });
let base: string;
let keys: Record<string, string>;
let threadId: string;

async function until(condition: () => boolean | Promise<boolean>, ms = 5000) {
  const end = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await Bun.sleep(5);
  }
}

const say = async (content: string, thread = threadId) => {
  const res = await h.call('POST', `/api/threads/${thread}/messages`, { key: keys.alice, body: { content } });
  expect(res.status).toBe(201);
  return res.body.data.id as string;
};

const acknowledgeAll = (username: string) =>
  h.db.sql`update deliveries set acknowledged_at = now()
           where recipient_id = (select id from agents where username = ${username}) and acknowledged_at is null`;

const json = (res: Response): Promise<any> => res.json();

const inboxOver = (port: number | string, key: string, query: string) =>
  fetch(`http://127.0.0.1:${port}/api/deliveries${query}`, { headers: { authorization: `Bearer ${key}` } });

beforeAll(async () => {
  keys = {};
  for (const name of ['alice', 'bob']) keys[name] = (await h.agent(name)).key;
  // A short idle timeout shows that a held request is not cut off by it.
  h.app.listen({ port: 0, hostname: '127.0.0.1', idleTimeout: 1 });
  base = `http://127.0.0.1:${h.app.server!.port}`;
  const opened = await h.call('POST', '/api/threads', { key: keys.alice, body: { title: 'Wait', participantUsernames: ['bob'] } });
  threadId = opened.body.data.id;
});

afterAll(async () => {
  await h.app.stop(true);
});

describe('wait validation', () => {
  test('a wait outside 0-60 or not a number is 400 naming the field and the bound', async () => {
    for (const wait of ['61', 'abc', '-1', '1e3', '60.5']) {
      const res = await h.call('GET', `/api/deliveries?wait=${wait}`, { key: keys.bob });
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ success: false, error: 'wait must be a number of seconds from 0 to 60' });
    }
  });

  test('no key is still 401 before the wait is looked at', async () => {
    const res = await h.call('GET', '/api/deliveries?wait=abc');
    expect(res.status).toBe(401);
  });

  // MCP's cap is lower, so that the longest wait still answers inside a client's default timeout.
  test('check_inbox refuses a bad wait with the same sentence, naming its own cap', async () => {
    const bob = await mcpClient(base, keys.bob!);
    expect(await bob.call('check_inbox', { wait: 50.5 })).toEqual({ error: 'wait must be a number of seconds from 0 to 50' });
    expect(await bob.call('check_inbox', { wait: 'soon' })).toEqual({ error: 'wait must be a number of seconds from 0 to 50' });
    await bob.close();
  });
});

describe('bounded wait', () => {
  // How fast a wait answers is measured by the benchmark (bench/load.ts, bounded wait); these tests
  // show what answers it: a bound of a second against waits of 20-30 s tells which, on any machine.
  test('does not wait when the inbox already has entries', async () => {
    const messageId = await say('already here');
    const started = performance.now();
    const res = await inboxOver(h.app.server!.port!, keys.bob!, '?wait=30');
    expect(performance.now() - started).toBeLessThan(1000);
    expect((await json(res)).data.map((e: { messageId: string }) => e.messageId)).toEqual([messageId]);
    await acknowledgeAll('bob');
  });

  test('wait=0 and no wait answer with [] without waiting', async () => {
    for (const query of ['', '?wait=0', '?wait=']) {
      const started = performance.now();
      const res = await h.call('GET', `/api/deliveries${query}`, { key: keys.bob });
      expect(performance.now() - started).toBeLessThan(1000);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ success: true, data: [] });
    }
  });

  test('an empty inbox answers [] when the wait ends', async () => {
    const started = performance.now();
    const res = await h.call('GET', '/api/deliveries?wait=0.3', { key: keys.bob });
    expect(performance.now() - started).toBeGreaterThanOrEqual(290);
    expect(res.body).toEqual({ success: true, data: [] });
    expect(h.inboxSignal.waiting()).toBe(0);
  });

  test('a held request over HTTP is woken by a post, not answered when its wait runs out', async () => {
    const { answer: held } = await parkedWait(h.db.sql, () => inboxOver(h.app.server!.port!, keys.bob!, '?wait=20'));
    expect(h.inboxSignal.waiting()).toBe(1);
    const messageId = await say('wake up');
    const posted = performance.now();
    const res = await held;
    expect(performance.now() - posted).toBeLessThan(1000);
    expect(res.status).toBe(200);
    const body = await json(res);
    expect(body.data).toHaveLength(1);
    expect(body.data[0]).toMatchObject({ messageId, threadId, sender: 'alice', summary: 'wake up', alreadyRead: false });
    expect(h.inboxSignal.waiting()).toBe(0);
    await acknowledgeAll('bob');
  });

  test('check_inbox with wait is woken the same way', async () => {
    const bob = await mcpClient(base, keys.bob!);
    const { answer: held } = await parkedWait(h.db.sql, () => bob.call('check_inbox', { wait: 20 }));
    expect(h.inboxSignal.waiting()).toBe(1);
    const messageId = await say('over MCP');
    const posted = performance.now();
    const { data } = await held;
    expect(performance.now() - posted).toBeLessThan(1000);
    expect(data.entries.map((e: { messageId: string }) => e.messageId)).toEqual([messageId]);
    await bob.close();
    await acknowledgeAll('bob');
  });

  test('a message for someone else does not answer the wait', async () => {
    const carol = await h.agent('carol');
    const held = h.call('GET', '/api/deliveries?wait=0.5', { key: keys.bob });
    await until(() => h.inboxSignal.waiting() === 1);
    const other = await h.call('POST', '/api/threads', { key: keys.alice, body: { title: 'Other', participantUsernames: ['carol'] } });
    await say('not for bob', other.body.data.id);
    expect((await held).body).toEqual({ success: true, data: [] });
    expect((await h.call('GET', '/api/deliveries', { key: carol.key })).body.data).toHaveLength(1);
  });

  test('a request held past the server idle timeout is not cut off', async () => {
    const res = await inboxOver(h.app.server!.port!, keys.bob!, '?wait=5');
    expect(res.status).toBe(200);
    expect(await json(res)).toEqual({ success: true, data: [] });
  }, 15_000);

  test('a caller that hangs up stops waiting', async () => {
    const gone = new AbortController();
    const held = fetch(`${base}/api/deliveries?wait=30`, { headers: { authorization: `Bearer ${keys.bob}` }, signal: gone.signal });
    await until(() => h.inboxSignal.waiting() === 1);
    gone.abort();
    await held.catch(() => {});
    await until(() => h.inboxSignal.waiting() === 0, 1000);
  });
  test('a wait whose time left has a fraction of a millisecond does not end before it', async () => {
    const started = performance.now();
    expect(await settlesWithin(new Promise<void>(() => {}), 50.9)).toBe(false);
    expect(performance.now() - started).toBeGreaterThanOrEqual(50.9);
  });
});

describe('many waiters, one listening connection', () => {
  test('500 held requests take no pool connections and all wake on one post', async () => {
    const agents = await Promise.all(['w1', 'w2', 'w3', 'w4', 'w5'].map((n) => h.agent(n)));
    const opened = await h.call('POST', '/api/threads', {
      key: keys.alice,
      body: { title: 'Crowd', participantUsernames: agents.map((a) => a.username) },
    });
    const held = agents.flatMap((a) =>
      Array.from({ length: 100 }, () =>
        h.app
          .handle(new Request('http://localhost/api/deliveries?wait=20', { headers: { authorization: `Bearer ${a.key}` } }))
          .then(json),
      ),
    );
    await until(() => h.inboxSignal.waiting() === 500, 10_000);

    // The pool has 10 connections; another request still gets one without waiting for the waits
    // to end, and the database sees the pool plus the one listening connection, not one per waiter.
    const started = performance.now();
    expect((await h.call('GET', '/api/threads', { key: keys.alice })).status).toBe(200);
    expect(performance.now() - started).toBeLessThan(1000);
    const [activity] = await h.db.sql<{ connections: number }[]>`
      select count(*)::int as connections from pg_stat_activity where datname = current_database()`;
    expect(activity!.connections).toBeLessThanOrEqual(11);
    expect(h.inboxSignal.waiting()).toBe(500);

    const messageId = await say('everyone', opened.body.data.id);
    const answers = await Promise.all(held);
    expect(answers.every((a) => a.success && a.data.length === 1 && a.data[0].messageId === messageId)).toBe(true);
    expect(h.inboxSignal.waiting()).toBe(0);
  }, 20_000);

  test('held requests of one agent woken by one post share one inbox read', async () => {
    const crowd = await h.agent('crowd');
    const opened = await h.call('POST', '/api/threads', { key: keys.alice, body: { title: 'One agent', participantUsernames: ['crowd'] } });
    // Every statement the service sends, seen by postgres.js as it sends it: the inbox read is the
    // one that pages on the inbox index.
    const options = (h.db.sql as unknown as { options: { debug: unknown } }).options;
    let inboxReads = 0;
    let lastReadAt = performance.now();
    options.debug = (_connection: number, query: string) => {
      if (!query.includes('order by d.recipient_id, d.id')) return;
      inboxReads++;
      lastReadAt = performance.now();
    };
    try {
      const held = Array.from({ length: 300 }, () =>
        h.app
          .handle(new Request('http://localhost/api/deliveries?wait=20', { headers: { authorization: `Bearer ${crowd.key}` } }))
          .then(json),
      );
      await until(() => h.inboxSignal.waiting() === 300, 10_000);
      // Each wait reads once after registering (waits registered together share a read, and one
      // that registered while a read ran takes the next); those reads end before the post, or a
      // wait whose read was still under way would rightly read again after the shared one. So: no
      // read sent for a while, and none running, looked at a few times (a read sent as the one
      // before it ends leaves a moment with none running).
      await until(async () => {
        if (performance.now() - lastReadAt < 200) return false;
        for (let look = 0; look < 3; look++) {
          const [busy] = await h.db.sql<{ n: number }[]>`
            select count(*)::int as n from pg_stat_activity
            where datname = current_database() and state = 'active' and pid <> pg_backend_pid()`;
          if (busy!.n > 0) return false;
          await Bun.sleep(20);
        }
        return performance.now() - lastReadAt >= 200;
      }, 10_000);

      inboxReads = 0;
      const messageId = await say('for the crowd', opened.body.data.id);
      const answers = await Promise.all(held);
      expect(answers.every((a) => a.success && a.data.length === 1 && a.data[0].messageId === messageId)).toBe(true);
      expect(inboxReads).toBe(1);
    } finally {
      options.debug = false;
    }
  }, 20_000);
});

describe('across instances and restarts', () => {
  test('a second server instance on the same database is woken by a post made through the first', async () => {
    const sql = connect(h.db.url, 2);
    const signal = listenForInbox(sql, silentLogger);
    await signal.start();
    const other = buildApp({ sql, config: h.config, log: silentLogger, inboxSignal: signal, agentCache: cacheAgents(sql, silentLogger) });
    try {
      const { answer: held } = await parkedWait(h.db.sql, () =>
        other.handle(new Request('http://localhost/api/deliveries?wait=20', { headers: { authorization: `Bearer ${keys.bob}` } })),
      );
      expect(signal.waiting()).toBe(1);
      const messageId = await say('from the other instance');
      const posted = performance.now();
      const body = await json(await held);
      expect(performance.now() - posted).toBeLessThan(1000);
      expect(body.data.map((e: { messageId: string }) => e.messageId)).toEqual([messageId]);
      await acknowledgeAll('bob');

      // Stopping the listener (shutdown) answers held requests at once instead of holding up the stop.
      const lingering = other.handle(new Request('http://localhost/api/deliveries?wait=20', { headers: { authorization: `Bearer ${keys.bob}` } }));
      await until(() => signal.waiting() === 1);
      const stopping = performance.now();
      await signal.stop();
      expect((await json(await lingering)).data).toEqual([]);
      expect(performance.now() - stopping).toBeLessThan(1000);
      const lateAt = performance.now();
      const late = await other.handle(new Request('http://localhost/api/deliveries?wait=20', { headers: { authorization: `Bearer ${keys.bob}` } }));
      expect((await json(late)).data).toEqual([]);
      expect(performance.now() - lateAt).toBeLessThan(1000);
    } finally {
      await sql.end({ timeout: 1 });
    }
  });

  test('a read woken while the database is away does not end the wait: it reads again, and the wait ends at its deadline', async () => {
    // The waiter's pool reaches PostgreSQL through a relay that can be cut; its listener does not.
    const target = new URL(h.db.url);
    const relayed = new Set<Socket<{ peer?: Socket<unknown>; early: Uint8Array[] }>>();
    const relay = (port: number) =>
      Bun.listen<{ peer?: Socket<unknown>; early: Uint8Array[] }>({
        hostname: '127.0.0.1',
        port,
        socket: {
          open(client) {
            client.data = { early: [] };
            relayed.add(client);
            void Bun.connect({
              hostname: target.hostname,
              port: Number(target.port),
              socket: {
                open(server) {
                  client.data.peer = server;
                  for (const chunk of client.data.early) server.write(chunk);
                },
                data: (_server, chunk) => void client.write(chunk),
                close: () => void client.end(),
              },
            });
          },
          data: (client, chunk) => (client.data.peer ? void client.data.peer.write(chunk) : void client.data.early.push(new Uint8Array(chunk))),
          close(client) {
            relayed.delete(client);
            client.data.peer?.end();
          },
        },
      });
    let listening = relay(0);
    const port = listening.port;
    const through = new URL(h.db.url);
    through.hostname = '127.0.0.1';
    through.port = String(port);
    const sql = connect(through.toString(), 1);
    const signal = listenForInbox(h.db.sql, silentLogger);
    await signal.start();
    try {
      await acknowledgeAll('bob');
      const [bob] = await h.db.sql<{ id: string }[]>`select id from agents where username = 'bob'`;
      const started = performance.now();
      const { answer } = await parkedWait(h.db.sql, () => waitForInbox(sql, signal, { id: bob!.id, username: 'bob' }, 50, 3));
      const outcome = answer.then(
        (entries) => ({ entries, ms: performance.now() - started }),
        (error: Error) => ({ error: error.message, ms: performance.now() - started }),
      );
      // The relay cut, the waiter is woken: its read cannot reach the database.
      listening.stop(true);
      for (const client of relayed) client.end();
      await h.db.sql`select pg_notify('ams_inbox', ${bob!.id})`;
      await Bun.sleep(300);
      listening = relay(port);
      const { ms, ...result } = await outcome;
      expect(result).toEqual({ entries: [] });
      expect(ms).toBeGreaterThanOrEqual(3_000);
      expect(ms).toBeLessThan(4_500);
    } finally {
      await signal.stop();
      await sql.end({ timeout: 1 });
      listening.stop(true);
    }
  });

  test('the listener comes back after its connection is killed and wakes every waiter to look again', async () => {
    const listeners = async () =>
      (
        await h.db.sql`
          select pid from pg_stat_activity
          where datname = current_database() and pid <> pg_backend_pid() and query ilike 'listen%'`
      ).map((r) => r.pid as number);
    const events: string[] = [];
    const sql = connect(h.db.url, 2);
    const signal = listenForInbox(sql, { ...silentLogger, info: (event) => void events.push(event) });
    const before = await listeners();
    await signal.start();
    const [mine] = (await listeners()).filter((pid) => !before.includes(pid));
    const other = buildApp({ sql, config: h.config, log: silentLogger, inboxSignal: signal, agentCache: cacheAgents(sql, silentLogger) });
    try {
      const { answer: held } = await parkedWait(h.db.sql, () =>
        other.handle(new Request('http://localhost/api/deliveries?wait=20', { headers: { authorization: `Bearer ${keys.bob}` } })),
      );
      // Woken by the reconnect, the waiter looks again and finds nothing; only then is the post made,
      // so that it can answer the wait through the new listening connection alone.
      await parkedWait(h.db.sql, async () => {
        await h.db.sql`select pg_terminate_backend(${mine!})`;
        await until(() => events.includes('inbox_listener_reconnected'));
      });
      expect(signal.waiting()).toBe(1);
      expect((await listeners()).filter((pid) => !before.includes(pid) && pid !== mine)).toHaveLength(1);
      const messageId = await say('after the outage');
      const posted = performance.now();
      expect((await json(await held)).data.map((e: { messageId: string }) => e.messageId)).toEqual([messageId]);
      expect(performance.now() - posted).toBeLessThan(1000);
    } finally {
      await signal.stop();
      await sql.end({ timeout: 1 });
    }
  });
});
