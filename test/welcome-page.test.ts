import { afterEach, expect, test } from 'bun:test';
import type { Subprocess } from 'bun';
import { pageHeaders } from '../src/web/page-headers';
import { track } from './support/children';
import { useHarness } from './support/harness';
import { eventually } from './support/receiver';

// The first things a newcomer meets: the server's address in a browser, and the start log's line
// saying where everything is.
const h = useHarness();
const get = (path: string, method = 'GET') => h.app.handle(new Request(`http://localhost${path}`, { method }));

test('GET / is a small page linking the dashboard, the API reference and health, with the pages\' security headers', async () => {
  const res = await get('/');
  expect([res.status, res.headers.get('content-type')]).toEqual([200, 'text/html; charset=utf-8']);
  const { 'content-security-policy': csp, 'x-content-type-options': nosniff, 'referrer-policy': referrer } = pageHeaders({ forms: false });
  expect([res.headers.get('content-security-policy'), res.headers.get('x-content-type-options'), res.headers.get('referrer-policy')]).toEqual([
    csp,
    nosniff,
    referrer,
  ]);
  const html = await res.text();
  const links = [...html.matchAll(/<a href="([^"]+)">([^<]+)<\/a>/g)].map((m) => [m[1], m[2]]);
  expect(links).toEqual([
    ['/dashboard', 'Dashboard'],
    ['/openapi', 'API reference'],
    ['/health', 'Health'],
  ]);
  // Each link leads somewhere: the dashboard to its sign-in, the others to their pages.
  expect(await Promise.all(links.map(async ([path]) => [path, (await get(path!)).status]))).toEqual([
    ['/dashboard', 303],
    ['/openapi', 200],
    ['/health', 200],
  ]);
  const head = await get('/', 'HEAD');
  expect([head.status, head.headers.get('content-type'), await head.text()]).toEqual([200, 'text/html; charset=utf-8', '']);
  // Not part of the agent API: the OpenAPI document leaves it out.
  const document = (await (await get('/openapi/json')).json()) as { paths: Record<string, unknown> };
  expect(Object.keys(document.paths).filter((path) => !path.startsWith('/api/') && !path.startsWith('/a2a/'))).toEqual([]);
});

const running = new Set<Subprocess>();
afterEach(async () => {
  for (const proc of running) proc.kill('SIGTERM');
  await Promise.all([...running].map((proc) => proc.exited));
  running.clear();
});

// The `listening` line of a process started with these settings.
async function listeningLine(role: 'serve' | 'worker', settings: Record<string, string>) {
  const env = { ...process.env, DATABASE_URL: h.db.url, PORT: '0', DB_POOL_SIZE: '4', WEBHOOK_CONCURRENCY: '4', LOG_LEVEL: 'info', ...settings };
  const proc = track(Bun.spawn(['bun', 'src/main.ts', role], { env, stdin: 'ignore', stdout: 'ignore', stderr: 'pipe' }));
  running.add(proc);
  let log = '';
  void (async () => {
    for await (const chunk of proc.stderr) log += new TextDecoder().decode(chunk);
  })();
  const find = () => log.split('\n').find((line) => line.includes('"event":"listening"'));
  await eventually(async () => find() !== undefined || proc.exitCode !== null, 30_000);
  expect([proc.exitCode, find() !== undefined, log]).toEqual([null, true, log]);
  const { time: _, ...line } = JSON.parse(find()!) as Record<string, unknown>;
  return line;
}

test('the start log names the address to open, the dashboard, the API reference and health', async () => {
  // On every address (the default HOST): the line names one a person can open on this machine.
  const all = await listeningLine('serve', { HOST: '0.0.0.0' });
  const [local, port] = /^http:\/\/127\.0\.0\.1:(\d+)$/.exec(all.url as string) ?? [];
  expect(all).toEqual({
    level: 'info',
    event: 'listening',
    url: local,
    address: `0.0.0.0:${port}`,
    dashboard: `${local}/dashboard`,
    apiReference: `${local}/openapi`,
    health: `${local}/health`,
  });
  expect((await fetch(local!)).status).toBe(200);
  // Behind PUBLIC_URL, the links are where people reach the service.
  const behind = await listeningLine('serve', { HOST: '127.0.0.1', PUBLIC_URL: 'https://ams.example.org/' });
  expect(behind).toEqual({
    level: 'info',
    event: 'listening',
    url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/),
    address: expect.stringMatching(/^127\.0\.0\.1:\d+$/),
    dashboard: 'https://ams.example.org/dashboard',
    apiReference: 'https://ams.example.org/openapi',
    health: 'https://ams.example.org/health',
  });
  // A worker serves its health and metrics only: no page to point to.
  const worker = await listeningLine('worker', { HOST: '127.0.0.1' });
  expect(worker).toEqual({
    level: 'info',
    event: 'listening',
    url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/),
    address: expect.stringMatching(/^127\.0\.0\.1:\d+$/),
  });
}, 120_000);
