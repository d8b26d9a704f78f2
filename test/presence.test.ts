import { afterAll, beforeAll, expect, test } from 'bun:test';
import type { Subprocess } from 'bun';
import { CLOSE_LINGER_MS } from '../src/domain/agents/presence';
import { track } from './support/children';
import { useDashboardHarness } from './support/dashboard';
import { freePort } from './support/ports';
import { eventually } from './support/receiver';
import { uniqueName, useListening, type TestAgent } from './support/harness';

// Presence across instances: the harness is one service, a `serve` process on the same database is
// another. An agent holding a stream or a wait on either is online for both, and stops being online
// shortly after it lets go; its last-seen time is written in batches, never per request.
const TOKEN = 'presence-metrics-token';
const h = useDashboardHarness({ METRICS_TOKEN: TOKEN });
const here = useListening(h);

let other: { base: string; proc: Subprocess };
beforeAll(async () => {
  const port = await freePort();
  const proc = track(
    Bun.spawn(['bun', 'src/main.ts', 'serve'], {
      env: { ...process.env, DATABASE_URL: h.db.url, HOST: '127.0.0.1', PORT: String(port), LOG_LEVEL: 'info', DB_POOL_SIZE: '4', WORKER: 'off' },
      stdin: 'ignore',
      stdout: 'ignore',
      stderr: 'pipe',
    }),
  );
  let log = '';
  void (async () => {
    for await (const chunk of proc.stderr) log += new TextDecoder().decode(chunk);
  })();
  await eventually(async () => log.includes('"event":"listening"') || proc.exitCode !== null, 30_000);
  expect([proc.exitCode, log.includes('"event":"listening"')]).toEqual([null, true]);
  other = { base: `http://127.0.0.1:${port}`, proc };
});
afterAll(async () => {
  other?.proc.kill('SIGTERM');
  await other?.proc.exited;
});

// What another agent sees of `agent` in the directory, asked of the harness's instance.
const presenceOf = async (asker: TestAgent, agent: TestAgent) => {
  const res = await h.call('GET', `/api/agents?q=${agent.username}`, { key: asker.key });
  expect(res.status).toBe(200);
  return res.body.data.agents.find((a: { username: string }) => a.username === agent.username).presence as { online: boolean; lastSeenAt: string | null };
};
const metric = async () => {
  const res = await h.call('GET', '/metrics', { key: TOKEN });
  return Number(/^ams_agents_online (\d+)$/m.exec(res.body)![1]);
};

test('an event stream held on another instance makes its agent online here; closing it makes it offline', async () => {
  const [asker, streamer] = [await h.agent(uniqueName('asker')), await h.agent(uniqueName('streamer'))];
  await h.invite('presence@example.com', 'presence-person');
  const cookie = await h.signIn('presence@example.com');
  const countOnDashboard = async () => (await h.send('GET', '/dashboard/api/presence', { cookie })).body.data.online as number;
  expect((await presenceOf(asker, streamer)).online).toBe(false);
  const before = await metric();
  expect(await countOnDashboard()).toBe(before);

  const closed = new AbortController();
  const stream = await fetch(`${other.base}/api/events`, { headers: { authorization: `Bearer ${streamer.key}` }, signal: closed.signal });
  expect(stream.status).toBe(200);
  const reader = stream.body!.getReader();
  await reader.read();
  await eventually(async () => (await presenceOf(asker, streamer)).online || null, 5_000);
  expect(await metric()).toBe(before + 1);
  expect(await countOnDashboard()).toBe(before + 1);
  const listed = await h.send('GET', `/dashboard/api/agents?q=${streamer.username}`, { cookie });
  expect(listed.body.data.items[0].presence.online).toBe(true);

  closed.abort();
  await reader.cancel().catch(() => {});
  const closedAt = Date.now();
  await eventually(async () => ((await presenceOf(asker, streamer)).online ? null : true), CLOSE_LINGER_MS + 5_000);
  // It lingers, so that a wait asked again at once does not flap.
  expect(Date.now() - closedAt).toBeGreaterThanOrEqual(CLOSE_LINGER_MS - 500);
  expect(await metric()).toBe(before);
});

test('a bounded inbox wait and an MCP stream make their agent online while they are held', async () => {
  const [asker, waiter] = [await h.agent(uniqueName('asker')), await h.agent(uniqueName('waiter'))];
  const waiting = fetch(`${other.base}/api/deliveries?wait=3`, { headers: { authorization: `Bearer ${waiter.key}` } });
  await eventually(async () => (await presenceOf(asker, waiter)).online || null, 3_000);
  expect((await waiting).status).toBe(200);
  await eventually(async () => ((await presenceOf(asker, waiter)).online ? null : true), CLOSE_LINGER_MS + 5_000);

  const closed = new AbortController();
  const mcp = await fetch(`${here.base}/mcp`, {
    headers: { authorization: `Bearer ${waiter.key}`, accept: 'text/event-stream' },
    signal: closed.signal,
  });
  expect(mcp.status).toBe(200);
  await eventually(async () => (await presenceOf(asker, waiter)).online || null, 3_000);
  closed.abort();
  await eventually(async () => ((await presenceOf(asker, waiter)).online ? null : true), CLOSE_LINGER_MS + 5_000);
});

test('an instance that stops beating no longer holds its agents online', async () => {
  const [asker, ghost] = [await h.agent(uniqueName('asker')), await h.agent(uniqueName('ghost'))];
  const instance = crypto.randomUUID();
  await h.db.sql`insert into presence_instances (id) values (${instance})`;
  await h.db.sql`insert into presence_connections (agent_id, instance_id) select id, ${instance} from agents where username = ${ghost.username}`;
  expect((await presenceOf(asker, ghost)).online).toBe(true);
  await h.db.sql`update presence_instances set heartbeat_at = now() - interval '31 seconds' where id = ${instance}`;
  expect((await presenceOf(asker, ghost)).online).toBe(false);
});

test('last seen is kept in memory and written in one batch, not per request', async () => {
  const [asker, busy] = [await h.agent(uniqueName('asker')), await h.agent(uniqueName('busy'))];
  const written = async () => (await h.db.sql`select 1 from agent_last_seen s join agents a on a.id = s.agent_id where a.username = ${busy.username}`).length;
  for (let i = 0; i < 5; i++) expect((await h.call('GET', '/api/threads', { key: busy.key })).status).toBe(200);
  expect(await written()).toBe(0);
  expect((await presenceOf(asker, busy)).lastSeenAt).toBeNull();
  const before = Date.now();
  await h.service.presence.flush();
  const { lastSeenAt } = await presenceOf(asker, busy);
  expect(Date.parse(lastSeenAt!)).toBeLessThanOrEqual(before);
  expect(Date.parse(lastSeenAt!)).toBeGreaterThan(before - 5_000);
});
