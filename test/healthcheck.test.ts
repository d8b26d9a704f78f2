import { afterEach, expect, test } from 'bun:test';
import type { Subprocess } from 'bun';
import { track } from './support/children';
import { containerFor } from './support/deploy-files';
import { useHarness } from './support/harness';
import { pgGate } from './support/pg-gate';
import { freePort } from './support/ports';
import { holdPort } from '../src/web/starting';
import { DATABASE_UNAVAILABLE } from '../src/db/unavailable';
import { eventually, receiver } from './support/receiver';

// `ams healthcheck` (the image's HEALTHCHECK) and the probes of the Kubernetes example, against
// real processes of each role: the server, and the worker alone, which serves its health on PORT.
const h = useHarness();
const running = new Set<Subprocess>();
const stopAll = async () => {
  for (const proc of running) proc.kill('SIGTERM');
  await Promise.all([...running].map((proc) => proc.exited));
  running.clear();
};
afterEach(stopAll);

// Small pools: several processes share the test server's connections.
const env = (port: number, extra: Record<string, string> = {}) => ({
  ...process.env,
  DATABASE_URL: h.db.url,
  HOST: '127.0.0.1',
  PORT: String(port),
  LOG_LEVEL: 'info',
  DB_POOL_SIZE: '4',
  WEBHOOK_CONCURRENCY: '4',
  ...extra,
});

async function start(role: 'serve' | 'worker', extra: Record<string, string> = {}) {
  const port = await freePort();
  const proc = track(Bun.spawn(['bun', 'src/main.ts', role], { env: env(port, extra), stdin: 'ignore', stdout: 'ignore', stderr: 'pipe' }));
  running.add(proc);
  let log = '';
  void (async () => {
    for await (const chunk of proc.stderr) log += new TextDecoder().decode(chunk);
  })();
  await eventually(async () => log.includes('"event":"listening"') || proc.exitCode !== null, 30_000);
  expect([proc.exitCode, log.includes('"event":"listening"')]).toEqual([null, true]);
  return { port, base: `http://127.0.0.1:${port}`, proc };
}

// Not spawnSync: the PostgreSQL gate of a test runs in this process and must keep answering.
async function healthcheck(port: number, extra: Record<string, string> = {}) {
  const proc = Bun.spawn(['bun', 'src/main.ts', 'healthcheck'], { env: env(port, extra), stdout: 'pipe', stderr: 'pipe' });
  const said = (await new Response(proc.stdout).text()).trim();
  return { exitCode: await proc.exited, said };
}

const get = async (url: string) => {
  const res = await fetch(url);
  return { status: res.status, body: (await res.json()) as { success: boolean; error?: string; data?: unknown }, requestId: res.headers.get('x-request-id') };
};

const OK = { status: 200, body: { success: true, data: { status: 'ok' } } };
const TOKEN = 'operator-token-of-the-tests';

test('each role answers for itself, on the paths the Kubernetes probes ask', async () => {
  const server = await start('serve', { WORKER: 'off' });
  const worker = await start('worker');
  for (const [role, process] of [['serve', server], ['worker', worker]] as const) {
    const container = containerFor(role);
    for (const probe of [container.startupProbe, container.readinessProbe, container.livenessProbe]) {
      const { status, body } = await get(process.base + probe.httpGet.path);
      expect([role, probe.httpGet.path, status, body]).toEqual([role, probe.httpGet.path, OK.status, OK.body]);
    }
    expect(await healthcheck(process.port)).toEqual({ exitCode: 0, said: '' });
  }
  // The worker serves its health and nothing of the agent API.
  const api = await get(`${worker.base}/api/deliveries`);
  expect([api.status, api.body]).toEqual([404, { success: false, error: 'No route for GET /api/deliveries.' }]);
});

test('a worker serves the metrics of the doorbells it rings, to the operator only', async () => {
  const hook = receiver();
  const worker = await start('worker', { METRICS_TOKEN: TOKEN, WEBHOOK_ALLOW_LOCAL: 'true' });
  const sender = await h.agent('metrics-sender');
  const recipient = await h.agent('metrics-recipient', { webhookUrl: hook.url() });
  await h.post(sender, await h.thread(sender, [recipient]), 'rung by the worker alone');
  await hook.waitFor(1);
  const scrape = () => fetch(`${worker.base}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } }).then((res) => res.text());
  const counted = await eventually(async () => /^ams_doorbell_attempt_duration_seconds_count\{outcome="notified",answer="2xx"\} 1$/m.test(await scrape()));
  expect(counted).toBe(true);
  expect((await fetch(`${worker.base}/metrics`)).status).toBe(401);
});

test('nothing listening: unhealthy, saying where it asked', async () => {
  const port = await freePort();
  const { exitCode, said } = await healthcheck(port);
  expect(exitCode).toBe(1);
  expect(said).toStartWith(`http://127.0.0.1:${port}/health did not answer: `);
});

test('a worker whose heartbeat does not reach the database is unhealthy while the database answers, and healthy once it beats again', async () => {
  const worker = await start('worker', { WORKER_HEARTBEAT_MS: '100', WORKER_STALE_MS: '500' });
  expect(await get(`${worker.base}/health`)).toMatchObject(OK);
  const silence = /^The worker's heartbeat has not reached the database for \d+ s; after 0\.5 s other workers take over its doorbells\.$/;
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  // The heartbeat's upsert waits behind this lock; `select 1` does not.
  const locked = h.db.sql.begin(async (tx) => {
    await tx`lock table worker_heartbeats in access exclusive mode`;
    await released;
  });
  try {
    let unhealthy = await get(`${worker.base}/health`);
    await eventually(async () => (unhealthy = await get(`${worker.base}/health`)).status === 503);
    expect(unhealthy.body.success).toBe(false);
    expect(unhealthy.body.error).toMatch(silence);
    expect(unhealthy.requestId).toMatch(/\S/);
    const checked = await healthcheck(worker.port);
    expect(checked.exitCode).toBe(1);
    expect(checked.said).toMatch(silence);
    // Liveness is not readiness: the process is up, and no probe should restart it for this.
    expect(await get(`${worker.base}/health/live`)).toMatchObject(OK);
  } finally {
    release();
    await locked;
  }
  await eventually(async () => (await get(`${worker.base}/health`)).status === 200);
  expect(await healthcheck(worker.port)).toEqual({ exitCode: 0, said: '' });
});

test('listening on every address, as in the image, the check asks loopback', async () => {
  const server = await start('serve', { WORKER: 'off', HOST: '0.0.0.0' });
  expect(await healthcheck(server.port, { HOST: '0.0.0.0' })).toEqual({ exitCode: 0, said: '' });
});

test('while the database is away: not ready, with the reason, but alive', async () => {
  const target = new URL(h.db.url);
  const gate = pgGate({ host: target.hostname, port: Number(target.port || 5432) });
  try {
    gate.open();
    const server = await start('serve', { WORKER: 'off', DATABASE_URL: gate.url(h.db.url) });
    expect(await get(`${server.base}/health`)).toMatchObject(OK);
    gate.close();
    gate.cutAll();
    const unready = await get(`${server.base}/health`);
    expect([unready.status, unready.body]).toEqual([503, { success: false, error: DATABASE_UNAVAILABLE }]);
    expect(await healthcheck(server.port)).toEqual({ exitCode: 1, said: DATABASE_UNAVAILABLE });
    expect(await get(`${server.base}/health/live`)).toMatchObject(OK);
    gate.open();
    await eventually(async () => (await get(`${server.base}/health`)).status === 200);
  } finally {
    // The server stops while its database is still reachable through the gate; stopped the other
    // way round, its pools would wait out their reconnects.
    await stopAll();
    gate.stop();
  }
});

test('while a process starts, its port says it is alive and not ready', async () => {
  const holding = holdPort('127.0.0.1', 0);
  try {
    const base = `http://127.0.0.1:${holding.port}`;
    expect(await get(`${base}/health/live`)).toMatchObject(OK);
    const starting = await get(`${base}/health`);
    expect([starting.status, starting.body]).toEqual([503, { success: false, error: DATABASE_UNAVAILABLE }]);
  } finally {
    holding.release();
  }
});
