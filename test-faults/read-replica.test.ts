import { afterAll, beforeAll, expect, test } from 'bun:test';
import { randomBytes } from 'node:crypto';
import { loadConfig } from '../src/config';
import { createAgent } from '../src/domain/agents/agents';
import { hashKey } from '../src/domain/agents/keys';
import { BY_CLI } from '../src/domain/people/audit';
import { invitePerson } from '../src/domain/people/people';
import { createLogger } from '../src/log';
import { createService, type HttpService } from '../src/service';
import { callApp } from '../test/support/harness';
import { eventReader } from '../test/support/events';
import { eventually } from '../test/support/receiver';
import { replicatedPair, type ReplicatedPair } from '../test/support/replicated-postgres';

// DATABASE_REPLICA_URL with a real streaming replica: a PostgreSQL 15 primary and a standby made
// from it by pg_basebackup. While the standby's replay is paused, what a read shows tells where it
// ran: a read that may lag does not see a write the primary already has; every other read does.
const TOKEN = 'operator-token-0123456789';
let pair: ReplicatedPair;
let service: HttpService;
const lines: Record<string, unknown>[] = [];

beforeAll(async () => {
  pair = await replicatedPair({ synchronous: false });
  const config = loadConfig({
    DATABASE_URL: pair.primary.url,
    DATABASE_REPLICA_URL: pair.standby.url,
    DB_POOL_SIZE: '4',
    DB_CONNECT_TIMEOUT_S: '2',
    METRICS_TOKEN: TOKEN,
  });
  const log = createLogger('info', (line) => lines.push(JSON.parse(line)));
  service = await createService(config, { log, http: true, worker: false });
}, 60_000);
afterAll(async () => {
  await service?.stop();
  await pair?.stop();
});

const call = (method: string, path: string, headers: Record<string, string> = {}, body?: unknown) => callApp(service.app, method, path, { headers, body });
const as = (key: string) => ({ authorization: `Bearer ${key}` });
const replay = (paused: boolean) => pair.standby.query(`select ${paused ? 'pg_wal_replay_pause' : 'pg_wal_replay_resume'}()`);
const details = async () => (await call('GET', '/health/details', as(TOKEN))).body.data.replica;
const metric = async (series: string) => {
  const text = (await call('GET', '/metrics', as(TOKEN))).body as string;
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? null : Number(line.split(' ')[1]);
};

test('reads that may lag are served by the replica, reads of your own writes by the primary, and the primary serves all while the replica is down', async () => {
  const agent = (username: string) => createAgent(service.sql, BY_CLI, { username }, { allowLocal: true });
  const ada = await agent('ada');
  const bob = await agent('bob');
  await invitePerson(service.sql, BY_CLI, { email: 'ops@example.com', username: 'ops' });
  const token = randomBytes(32).toString('base64url');
  await service.sql`insert into sessions (token_hash, person_id, expires_at) select ${hashKey(token)}, id, now() + interval '1 hour' from people`;
  const person = { cookie: `ams_session=${token}` };
  const open = await call('POST', '/api/threads', as(ada.apiKey), { title: 'Before the pause', participantUsernames: ['bob'] });
  expect(open.status).toBe(201);
  const searchFor = async (word: string) => {
    const found = await call('GET', `/api/messages/search?q=${word}`, as(bob.apiKey));
    expect(found.status).toBe(200);
    return found.body.data.results.map((r: { messageId: string }) => r.messageId);
  };
  const directory = async () => (await call('GET', '/api/agents', as(ada.apiKey))).body.data.agents.map((a: { username: string }) => a.username);
  const dashboardThreads = async () => (await call('GET', '/dashboard/api/threads', person)).body.data.items.map((t: { title: string }) => t.title);
  const overviewCount = async () => (await call('GET', '/dashboard/api/overview', person)).body.data.headline.deliveries;
  const dashboardAgents = async () => (await call('GET', '/dashboard/api/agents', person)).body.data.items.map((a: { username: string }) => a.username);

  const first = await call('POST', `/api/threads/${open.body.data.id}/messages`, as(ada.apiKey), { content: 'zephyr one' });
  expect(first.status).toBe(201);
  await eventually(async () => (await searchFor('zephyr')).length === 1);
  expect(await details()).toEqual({ serving: true, since: expect.any(String) });
  expect(await metric('ams_database_replica_serving')).toBe(1);
  // The replica holds this process's connections for those reads.
  const onReplica = await pair.standby.query<{ n: number }>(
    "select count(*)::int as n from pg_stat_activity where datname = 'ams' and application_name = 'agent-messaging-service'",
  );
  expect(onReplica[0]!.n).toBeGreaterThan(0);

  // Replay paused: the replica stands still while the primary moves on.
  await replay(true);
  const carol = await agent('carol');
  const later = await call('POST', '/api/threads', as(ada.apiKey), { title: 'While paused', participantUsernames: ['bob'] });
  const second = await call('POST', `/api/threads/${later.body.data.id}/messages`, as(ada.apiKey), { content: 'zephyr two' });
  expect(second.status).toBe(201);
  // Search, the directory and the dashboard's lists and overview read the replica: not yet.
  expect(await searchFor('zephyr')).toEqual([first.body.data.id]);
  expect(await directory()).toEqual(['bob']);
  expect(await dashboardThreads()).toEqual(['Before the pause']);
  expect(await dashboardAgents()).toEqual(['bob', 'ada']);
  expect(await overviewCount()).toBe(1);
  // The inbox, a thread's own reads and receipts read the primary: the caller's own writes are there.
  const inbox = await call('GET', '/api/deliveries', as(bob.apiKey));
  expect(inbox.body.data.map((d: { messageId: string }) => d.messageId)).toEqual([first.body.data.id, second.body.data.id]);
  expect((await call('GET', `/dashboard/api/threads/${later.body.data.id}`, person)).body.data.title).toBe('While paused');
  expect((await call('GET', `/api/messages/${second.body.data.id}/deliveries`, as(ada.apiKey))).status).toBe(200);
  expect(carol.username).toBe('carol');

  await replay(false);
  await eventually(async () => (await searchFor('zephyr')).length === 2);
  expect(await directory()).toEqual(['bob', 'carol']);
  expect(await dashboardThreads()).toEqual(['While paused', 'Before the pause']);

  // The replica goes away: the same reads answer from the primary, and say so once.
  const primaryBefore = (await metric('ams_lagging_reads_total{on="primary"}')) ?? 0;
  expect(primaryBefore).toBe(0);
  await pair.standby.stop();
  const during = await call('POST', `/api/threads/${later.body.data.id}/messages`, as(ada.apiKey), { content: 'zephyr three' });
  expect(await searchFor('zephyr')).toHaveLength(3);
  expect(await directory()).toEqual(['bob', 'carol']);
  expect(await dashboardThreads()).toEqual(['While paused', 'Before the pause']);
  expect(await overviewCount()).toBe(3);
  expect(during.status).toBe(201);
  expect(await details()).toEqual({ serving: false, since: expect.any(String) });
  expect((await call('GET', '/health')).status).toBe(200);
  expect(await metric('ams_database_replica_serving')).toBe(0);
  expect(await metric('ams_lagging_reads_total{on="primary"}')).toBeGreaterThanOrEqual(4);
  expect(lines.filter((l) => l.event === 'replica_unavailable')).toHaveLength(1);
  expect(lines.find((l) => l.event === 'replica_unavailable')).toMatchObject({ level: 'warn', readsOn: 'primary' });

  // Back: its reads return to it, said once.
  await pair.standby.start();
  await eventually(async () => (await details()).serving, 10_000);
  const replicaBefore = (await metric('ams_lagging_reads_total{on="replica"}'))!;
  await eventually(async () => (await searchFor('zephyr')).length === 3);
  expect(await metric('ams_lagging_reads_total{on="replica"}')).toBeGreaterThan(replicaBefore);
  expect(lines.filter((l) => l.event === 'replica_serving')).toHaveLength(1);
  expect(lines.filter((l) => l.event === 'replica_unavailable')).toHaveLength(1);

  // An open dashboard is told of a change once the replica has it, so that the list it reads
  // again shows the change, not the moment before.
  const leave = new AbortController();
  const stream = await service.app.handle(new Request('http://localhost/dashboard/api/deliveries/events', { headers: person, signal: leave.signal }));
  const next = eventReader(stream.body!);
  expect((await next()).event).toBe('ready');
  const heard: { event: string; data: any; at: number }[] = [];
  const listening = (async () => {
    for (;;) heard.push({ ...(await next()), at: performance.now() });
  })().catch(() => {});
  await replay(true);
  const told = await call('POST', '/api/threads', as(ada.apiKey), { title: 'Told once replayed', participantUsernames: ['bob'] });
  await Bun.sleep(300);
  expect(heard.filter((e) => e.event === 'thread')).toEqual([]);
  const resumedAt = performance.now();
  await replay(false);
  const event = await eventually(async () => heard.find((e) => e.event === 'thread' && e.data.ids.includes(told.body.data.id)));
  expect(event.at).toBeGreaterThanOrEqual(resumedAt);
  expect(await dashboardThreads()).toEqual(['Told once replayed', 'While paused', 'Before the pause']);
  leave.abort();
  await listening;
}, 60_000);
