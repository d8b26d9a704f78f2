import { expect, test } from 'bun:test';
import { loadConfig } from '../src/config';
import { buildApp } from '../src/app';
import { silentLogger } from '../src/log';
import { callApp, uniqueName, useHarness } from './support/harness';
import { parkedWait } from './support/inbox';
import { eventually, receiver } from './support/receiver';
import { FAST_WEBHOOKS, post, untilStep } from './support/webhooks';

// GET /metrics as a Prometheus scraper sees it, from the service as `ams serve` wires it (worker
// included), on this file's own database, so that every figure can be asserted exactly.
const TOKEN = 'scrape-me-0123456789';
// Retries far apart, so that a failed first attempt leaves its retry scheduled while we look.
const h = useHarness({ ...FAST_WEBHOOKS, WEBHOOK_RETRY_DELAYS_MS: '600000', METRICS_TOKEN: TOKEN }, { worker: true });
const hook = receiver((req) => new Response(req.path === '/down' ? 'no' : 'ok', { status: req.path === '/down' ? 503 : 200 }));

async function scrape(): Promise<Map<string, number>> {
  const res = await h.call('GET', '/metrics', { key: TOKEN });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toStartWith('text/plain; version=0.0.4');
  const samples = new Map<string, number>();
  for (const line of String(res.body).split('\n')) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})?) (\S+)$/.exec(line);
    if (match) samples.set(match[1]!, Number(match[2]));
  }
  return samples;
}

test('metrics need the configured token, and are not served at all without one', async () => {
  const missing = await h.call('GET', '/metrics');
  expect([missing.status, missing.body, missing.headers.get('www-authenticate')]).toEqual([
    401,
    { success: false, error: 'Send the operator token: "Authorization: Bearer <METRICS_TOKEN>".' },
    'Bearer realm="operator"',
  ]);
  expect((await h.call('GET', '/metrics', { key: `${TOKEN}x` })).status).toBe(401);
  const agent = await h.agent(uniqueName('not-a-scraper'));
  expect((await h.call('GET', '/metrics', { key: agent.key })).status).toBe(401);
  const off = buildApp({ sql: h.db.sql, config: loadConfig({ DATABASE_URL: h.db.url }), log: silentLogger, inboxSignal: h.inboxSignal, agentCache: h.agentCache });
  const answer = await callApp(off, 'GET', '/metrics', { headers: { authorization: `Bearer ${TOKEN}` } });
  expect([answer.status, answer.body]).toEqual([404, { success: false, error: 'Operator routes are off: set METRICS_TOKEN to serve /metrics and /health/details.' }]);
});

test('HTTP requests are counted by method, route template and status', async () => {
  const before = await scrape();
  const agent = await h.agent(uniqueName('counted'));
  const other = await h.agent(uniqueName('counted'));
  const threadId = await h.thread(agent, [other]);
  for (let i = 0; i < 3; i++) await h.post(agent, threadId, `message ${i}`);
  await h.call('GET', `/api/threads/${threadId}`);
  const posts = 'ams_http_request_duration_seconds_count{method="POST",route="/api/threads/:threadId/messages",status="201"}';
  // A request is counted once its answer has gone out, a moment after the client has it.
  const after = await eventually(async () => {
    const now = await scrape();
    return (now.get(posts) ?? 0) - (before.get(posts) ?? 0) === 3 ? now : null;
  });
  const delta = (series: string) => (after.get(series) ?? 0) - (before.get(series) ?? 0);
  expect(delta(posts)).toBe(3);
  expect(delta('ams_http_request_duration_seconds_count{method="POST",route="/api/threads",status="201"}')).toBe(1);
  expect(delta('ams_http_request_duration_seconds_count{method="GET",route="/api/threads/:threadId",status="401"}')).toBe(1);
  expect([...after.keys()].some((series) => series.includes(threadId))).toBe(false);
});

test('refusals given before routing are counted too', async () => {
  const before = await scrape();
  const over = await h.call('POST', '/api/threads', { raw: 'x'.repeat(1_048_577), headers: { 'content-type': 'application/json' } });
  const nul = await h.call('GET', '/api/threads/%00');
  const foreign = await h.call('POST', '/mcp', { body: { jsonrpc: '2.0', id: 1, method: 'tools/list' }, headers: { origin: 'http://evil.example.com' } });
  expect([over.status, nul.status, foreign.status]).toEqual([413, 400, 403]);
  const after = await scrape();
  const delta = (series: string) => (after.get(series) ?? 0) - (before.get(series) ?? 0);
  expect([
    delta('ams_http_request_duration_seconds_count{method="POST",route="before_routing",status="413"}'),
    delta('ams_http_request_duration_seconds_count{method="GET",route="before_routing",status="400"}'),
    delta('ams_http_request_duration_seconds_count{method="POST",route="/mcp",status="403"}'),
  ]).toEqual([1, 1, 1]);
});

test('deliveries by step, retrying, doorbell attempts by outcome and the jobs still owed', async () => {
  const sender = await h.agent(uniqueName('sender'));
  const up = await h.agent(uniqueName('up'), { webhookUrl: hook.url('/up') });
  const down = await h.agent(uniqueName('down'), { webhookUrl: hook.url('/down') });
  const notified = await post(h, sender, up, { content: 'ring' });
  const retrying = await post(h, sender, down, { content: 'ring' });
  await untilStep(h, notified.deliveryId, 'notified');
  await eventually(async () => (await h.db.sql`select 1 from deliveries where id = ${retrying.deliveryId} and next_attempt_at is not null`).length === 1);
  const samples = await scrape();
  const steps = await h.db.sql<{ step: string; n: number }[]>`select step, count(*)::int as n from deliveries group by step`;
  for (const step of ['accepted', 'notified', 'delivered', 'fetched', 'failed']) {
    expect([step, samples.get(`ams_deliveries{step="${step}"}`)]).toEqual([step, steps.find((s) => s.step === step)?.n ?? 0]);
  }
  expect(samples.get('ams_deliveries_retrying')).toBe(1);
  expect(samples.get('ams_deliveries_stalled')).toBe(0);
  expect(samples.get('ams_doorbell_attempt_duration_seconds_count{outcome="notified",answer="2xx"}')).toBe(1);
  expect(samples.get('ams_doorbell_attempt_duration_seconds_count{outcome="retry",answer="5xx"}')).toBe(1);
  // The scheduled retry is the one job still owed, and it is not due yet.
  expect(samples.get('ams_doorbell_jobs_owed')).toBe(1);
  expect(samples.get('ams_doorbell_oldest_due_seconds')).toBe(0);
});

test('waiting inbox requests, the listener, the pool and the process', async () => {
  const agent = await h.agent(uniqueName('waiter'));
  const { answer } = await parkedWait(h.db.sql, () => h.call('GET', '/api/deliveries?wait=30', { key: agent.key }));
  const samples = await scrape();
  expect(samples.get('ams_inbox_waiting_requests')).toBe(1);
  expect(samples.get('ams_inbox_listener_connects')).toBe(1);
  expect(samples.get('ams_database_pool_size')).toBe(10);
  expect(samples.get('ams_database_connections{state="active"}')).toBeGreaterThanOrEqual(1);
  expect(samples.get('ams_process_resident_memory_bytes')).toBeGreaterThan(0);
  expect(samples.has('ams_nodejs_eventloop_lag_p99_seconds')).toBe(true);
  expect(samples.get('ams_nodejs_heap_size_used_bytes')).toBeGreaterThan(0);
  expect([...samples.keys()].filter((name) => name.startsWith('ams_nodejs_heap_space_'))).toEqual([]);
  const other = await h.agent(uniqueName('poster'));
  await h.post(other, await h.thread(other, [agent]), 'wake up');
  expect((await answer).body.data).toHaveLength(1);
  expect((await scrape()).get('ams_inbox_waiting_requests')).toBe(0);
});

test('open event streams', async () => {
  const agent = await h.agent(uniqueName('streamer'));
  expect((await scrape()).get('ams_event_streams_open')).toBe(0);
  const stream = await h.app.handle(new Request('http://localhost/api/events', { headers: { authorization: `Bearer ${agent.key}` } }));
  expect(stream.status).toBe(200);
  expect((await scrape()).get('ams_event_streams_open')).toBe(1);
  await stream.body!.cancel();
  expect((await scrape()).get('ams_event_streams_open')).toBe(0);
});

test('every series the Grafana dashboard in docs/ queries is one the service exports', async () => {
  const dashboard = await Bun.file(new URL('../docs/grafana-dashboard.json', import.meta.url)).json();
  const queried = new Set<string>();
  for (const panel of dashboard.panels) for (const target of panel.targets) for (const name of target.expr.match(/ams_[a-z0-9_]+/g)) queried.add(name);
  const exported = String((await h.call('GET', '/metrics', { key: TOKEN })).body);
  const missing = [...queried].filter((name) => !new RegExp(`^${name}[{ ]`, 'm').test(exported));
  expect(missing).toEqual([]);
  expect(queried.size).toBeGreaterThan(10);
});
