import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { Elysia } from 'elysia';
import { buildApp } from '../src/app';
import { referencePage, SCALAR_PATH, SCALAR_VERSION } from '../src/http/reference-page';
import { silentLogger } from '../src/log';
import { track } from './support/children';
import { launchChromium } from './support/chromium';
import { useHarness } from './support/harness';
import { VENDORED } from '../src/dashboard/pages';

// The API reference page in a real headless Chromium against the real server on a local port,
// with every request to any other host refused, as on a machine without internet.
const h = useHarness();
const ARTIFACTS = 'test-artifacts/openapi';

let server: ReturnType<ReturnType<typeof buildApp>['listen']>;
let base: string;
let context: BrowserContext;
let browser: Awaited<ReturnType<typeof launchChromium>> | undefined;

beforeAll(async () => {
  server = buildApp({ sql: h.db.sql, config: h.config, log: silentLogger, inboxSignal: h.inboxSignal, agentCache: h.agentCache }).listen({
    hostname: '127.0.0.1',
    port: 0,
  });
  base = `http://127.0.0.1:${server.server!.port}`;
  browser = await launchChromium({ width: 1280, height: 900 });
  context = browser.context;
  mkdirSync(ARTIFACTS, { recursive: true });
}, 30_000);

afterAll(async () => {
  await browser?.close();
  await server?.stop(true);
});

// A page whose requests to anything but this server are aborted and recorded, with its console
// errors and Content-Security-Policy violations collected.
const OPERATIONS = [
  'Inbox',
  'Report delivered',
  'Acknowledge',
  'List threads',
  'Open a thread',
  'Get one thread',
  'Add a participant',
  'Request close',
  'List messages',
  'Post a message',
  'message.created',
];

async function offlinePage(viewport: { width: number; height: number }, origin = base) {
  const page: Page = await context.newPage();
  page.setDefaultTimeout(20_000);
  await page.setViewportSize(viewport);
  const outside: string[] = [];
  const problems: string[] = [];
  const violations: string[] = [];
  await page.route('**/*', (route) => {
    const url = route.request().url();
    if (new URL(url).origin === origin) return route.continue();
    outside.push(url);
    return route.abort('internetdisconnected');
  });
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(message.text());
  });
  page.on('pageerror', (error) => problems.push(error.message));
  await page.exposeFunction('reportViolation', (violation: string) => violations.push(violation));
  await page.addInitScript(
    "document.addEventListener('securitypolicyviolation', (e) => window.reportViolation(e.violatedDirective + ' ' + e.blockedURI))",
  );
  return { page, outside, problems, violations };
}

// The page navigates itself and the test waits for its load event. The first load leaves
// about:blank; a later one keeps the origin and loads the new address afresh, as a reload after a
// goto would, hash and all.
async function load(page: Page, url: string) {
  const loaded = page.waitForEvent('load');
  await page.evaluate(`setTimeout(() => {
    const target = ${JSON.stringify(url)};
    if (location.protocol === 'about:') location.assign(target);
    else { history.replaceState(null, '', target); location.reload(); }
  })`);
  await loaded;
}

test('offline, from the bundle this server serves, the reference lists every operation on a desktop and opens one by link on a phone', async () => {
  const { page, outside, problems, violations } = await offlinePage({ width: 1280, height: 900 });
  const scripts = new Set<string>();
  page.on('request', (request) => {
    if (request.resourceType() === 'script') scripts.add(new URL(request.url()).pathname);
  });
  for (const [name, viewport, path] of [
    ['desktop', { width: 1280, height: 900 }, '/openapi'],
    ['phone', { width: 390, height: 844 }, '/openapi#tag/threads/POST/api/threads/{threadId}/messages'],
  ] as const) {
    await page.setViewportSize(viewport);
    await load(page, base + path);
    await expect(page.title()).resolves.toBe('Agent Messaging Service');
    const shown = name === 'desktop' ? OPERATIONS : ['Post a message'];
    for (const summary of shown) await page.getByText(summary, { exact: true }).filter({ visible: true }).first().waitFor();
    await page.getByText('/api/threads/{threadId}/messages').filter({ visible: true }).first().waitFor();
    // The document's top-level security: the page offers the agent key, not "No authentication".
    if (name === 'desktop') await page.getByText('Bearer Token').filter({ visible: true }).first().waitFor();
    else await page.getByText('Auth Required').filter({ visible: true }).first().waitFor();
    expect(await page.getByText('No authentication selected').count()).toBe(0);
    await page.waitForLoadState('networkidle');
    await page.screenshot({ path: `${ARTIFACTS}/reference-${name}.png` });
  }
  // The one refusal is zod's probe for `Function('')` inside try/catch; it then validates without
  // compiling, so eval stays forbidden.
  expect([outside, problems, [...scripts], [...new Set(violations)]]).toEqual([[], [], [SCALAR_PATH], ['script-src eval']]);
}, 60_000);

test('the bundle is the pinned version, served for long caching as JavaScript', async () => {
  const installed = JSON.parse(readFileSync('node_modules/@scalar/api-reference/package.json', 'utf8')).version;
  const declared = JSON.parse(readFileSync('package.json', 'utf8')).dependencies['@scalar/api-reference'];
  expect([installed, declared]).toEqual([SCALAR_VERSION, SCALAR_VERSION]);

  const res = await fetch(base + SCALAR_PATH);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
  expect(res.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
  const body = await res.text();
  expect(body).toBe(readFileSync('node_modules/@scalar/api-reference/dist/browser/standalone.js', 'utf8'));
});

test('the compiled executable, built by the build script, serves the same bundle (and the dashboard\'s modules), and reads no .env or bunfig.toml where it runs', async () => {
  const outDir = mkdtempSync(join(tmpdir(), 'ams-build-'));
  try {
    const build = JSON.parse(readFileSync('package.json', 'utf8')).scripts.build.replace('dist/ams', join(outDir, 'ams')).split(' ');
    const built = Bun.spawnSync(build, { stdout: 'ignore', stderr: 'pipe' });
    expect([built.exitCode, built.stderr.toString()]).toEqual([0, '']);
    const env = { ...process.env, DATABASE_URL: h.db.url, PORT: '0', HOST: '127.0.0.1' };
    // The executable reads no `.env` or bunfig.toml from the folder it runs in (the build turns
    // Bun's loading of them off): either of these would keep it from logging where it listens.
    writeFileSync(join(outDir, '.env'), 'LOG_LEVEL=error\n');
    writeFileSync(join(outDir, 'bunfig.toml'), 'preload = ["./preload.js"]\n');
    writeFileSync(join(outDir, 'preload.js'), 'process.exit(9);\n');
    const proc = track(Bun.spawn([join(outDir, 'ams'), 'serve'], { cwd: outDir, env, stdout: 'ignore', stderr: 'pipe', stdin: 'ignore' }));
    let log = '';
    void (async () => {
      for await (const chunk of proc.stderr) log += new TextDecoder().decode(chunk);
    })();
    let port: string | undefined;
    for (const deadline = Date.now() + 30_000; !port && Date.now() < deadline && proc.exitCode === null; await Bun.sleep(50)) {
      port = /"event":"listening","url":"http:\/\/[^:]+:(\d+)"/.exec(log)?.[1];
    }
    try {
      expect([port !== undefined, log]).toEqual([true, log]);
      const page = await (await fetch(`http://127.0.0.1:${port}/openapi`)).text();
      expect(page).toContain(`<script src="${SCALAR_PATH}"></script>`);
      const bundle = await fetch(`http://127.0.0.1:${port}${SCALAR_PATH}`);
      expect(bundle.status).toBe(200);
      expect(await bundle.text()).toBe(readFileSync('node_modules/@scalar/api-reference/dist/browser/standalone.js', 'utf8'));
      // The dashboard's vendored modules travel inside the executable too.
      const preact = await fetch(`http://127.0.0.1:${port}/dashboard/assets/preact-${VENDORED.preact}.js`);
      expect(await preact.text()).toBe(readFileSync('node_modules/preact/dist/preact.module.js', 'utf8'));
      const uplot = await fetch(`http://127.0.0.1:${port}/dashboard/assets/uplot-${VENDORED.uplot}.js`);
      expect(await uplot.text()).toBe(readFileSync('node_modules/uplot/dist/uPlot.esm.js', 'utf8'));
      const uplotCss = await fetch(`http://127.0.0.1:${port}/dashboard/assets/uplot-${VENDORED.uplot}.css`);
      expect(await uplotCss.text()).toBe(readFileSync('node_modules/uplot/dist/uPlot.min.css', 'utf8'));
    } finally {
      proc.kill('SIGTERM');
      await proc.exited;
    }
  } finally {
    rmSync(outDir, { recursive: true, force: true });
  }
}, 60_000);

test('the page names no other host and forbids scripts and styles from elsewhere', async () => {
  const res = await fetch(`${base}/openapi`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
  const html = await res.text();
  expect(html).not.toMatch(/https?:/);
  expect(res.headers.get('content-security-policy')).toBe(
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; connect-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'",
  );
});

test('a title and description with markup characters show as text, with nothing stray on the page', async () => {
  const hostile = { title: 'A <b>bold</b> & "quoted" API', description: 'Uses "quotes" /> <script>alert(1)</script> & <i>tags</i>' };
  const small = new Elysia().use(referencePage(hostile, '/openapi/json')).get('/openapi/json', () => ({ openapi: '3.1.0', info: { title: 'x', version: '1' }, paths: {} }));
  const reference = small.listen({ hostname: '127.0.0.1', port: 0 });
  try {
    const origin = `http://127.0.0.1:${reference.server!.port}`;
    const html = await (await fetch(`${origin}/openapi`)).text();
    expect(html).toContain('<title>A &#60;b&#62;bold&#60;/b&#62; &#38; &#34;quoted&#34; API</title>');
    expect(html).not.toContain('<script>alert');
    const { page } = await offlinePage({ width: 1280, height: 900 }, origin);
    let alerted = false;
    page.on('dialog', (dialog) => {
      alerted = true;
      void dialog.dismiss();
    });
    await page.goto(`${origin}/openapi`);
    const head = await page.evaluate(`({
      title: document.title,
      description: document.querySelector('meta[name="description"]')?.getAttribute('content'),
      og: document.querySelector('meta[property="og:description"]')?.getAttribute('content'),
      bodyText: document.body.innerText,
    })`) as { title: string; description: string; og: string; bodyText: string };
    expect(head).toEqual({ title: hostile.title, description: hostile.description, og: hostile.description, bodyText: head.bodyText });
    for (const stray of ['quotes', 'alert', '/>', 'tags']) expect(head.bodyText).not.toContain(stray);
    expect(alerted).toBe(false);
  } finally {
    await reference.stop(true);
  }
});
