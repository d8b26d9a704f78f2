import { afterAll, beforeAll } from 'bun:test';
import { mkdirSync } from 'node:fs';
import type { BrowserContext, Page } from 'playwright-core';
import { invitePerson } from '../../src/domain/people/people';
import { buildApp } from '../../src/app';
import { createLogger } from '../../src/log';
import { launchChromium } from './chromium';
import { useHarness, type Harness } from './harness';
import { freePort } from './ports';
import { BY_CLI } from '../../src/domain/people/audit';

export const ARTIFACTS = 'test-artifacts/dashboard';

export type DashboardBrowser = {
  h: Harness;
  base: string;
  page: Page;
  context: BrowserContext;
  logLines: Record<string, any>[];
  // Signs `email` in over HTTP (the code taken from the log) and gives the browser its cookie,
  // unless the browser already holds a live session.
  signIn: (email: string, username: string) => Promise<void>;
  // An agent's call to the HTTP API of the server the browser sees.
  agentCall: (method: string, path: string, key: string, body?: unknown) => Promise<any>;
  screenshot: (name: string) => Promise<void>;
  // The listening server, for tests that stop it and start it again on the same port.
  restart: (between?: () => Promise<void>) => Promise<void>;
  stop: () => Promise<void>;
};

// The real server listening on a local port, a headless Chromium in front of it, and a person
// signed in: what the dashboard's browser tests share. With `oauth`, the port is chosen first and
// the service started with PUBLIC_URL naming it, which turns on OAuth sign-in for MCP clients; with
// `worker`, the webhook worker runs in it.
export function useDashboardBrowser(
  env: Record<string, string> = {},
  viewport = { width: 1100, height: 800 },
  { oauth = false, worker = false } = {},
): DashboardBrowser {
  let port = 0;
  const harnessEnv = { ...env };
  // Runs before the harness's own beforeAll, which reads the environment when it starts.
  if (oauth) {
    beforeAll(async () => {
      port = await freePort();
      harnessEnv.PUBLIC_URL = `http://127.0.0.1:${port}`;
    });
  }
  const h = useHarness(harnessEnv, { worker });
  const b = { h, logLines: [] } as unknown as DashboardBrowser;
  let server: ReturnType<ReturnType<typeof buildApp>['listen']> | undefined;
  let browser: Awaited<ReturnType<typeof launchChromium>> | undefined;
  const listen = (port: number) => {
    const log = createLogger('info', (line) => b.logLines.push(JSON.parse(line)));
    server = buildApp({ sql: h.db.sql, config: h.config, log, inboxSignal: h.inboxSignal, agentCache: h.agentCache, oauth: h.service.oauth }).listen({
      hostname: '127.0.0.1',
      port,
    });
    return server.server!.port!;
  };

  beforeAll(async () => {
    b.base = `http://127.0.0.1:${listen(port)}`;
    browser = await launchChromium(viewport);
    b.context = browser.context;
    b.page = b.context.pages()[0] ?? (await b.context.newPage());
    b.page.setDefaultTimeout(10_000);
    b.page.on('dialog', (dialog) => void dialog.accept());
    mkdirSync(ARTIFACTS, { recursive: true });
  }, 30_000);

  afterAll(async () => {
    await browser?.close();
    await server?.stop(true);
  });

  b.signIn = async (email, username) => {
    // Still signed in from an earlier test: nothing to do (each new code counts against the limits).
    const held = (await b.context.cookies(`${b.base}/dashboard/`)).find((c) => c.name === 'ams_session');
    if (held && (await fetch(`${b.base}/dashboard/api/me`, { headers: { cookie: `ams_session=${held.value}` } })).status === 200) return;
    const [known] = await h.db.sql`select 1 from people where email = ${email}`;
    if (!known) await invitePerson(h.db.sql, BY_CLI, { email, username });
    const post = (path: string, body: unknown) =>
      fetch(`${b.base}/dashboard/api/sign-in/${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-requested-with': 'fetch' },
        body: JSON.stringify(body),
      });
    await post('code', { email });
    const code = b.logLines.findLast((l) => l.event === 'sign_in_code' && l.email === email)?.code;
    const res = await post('verify', { email, code });
    if (res.status !== 200) throw new Error(`sign-in failed: ${await res.text()}`);
    const token = /ams_session=([^;]+)/.exec(res.headers.get('set-cookie') ?? '')![1]!;
    await b.context.addCookies([{ name: 'ams_session', value: token, domain: '127.0.0.1', path: '/dashboard', httpOnly: true, sameSite: 'Lax' }]);
  };

  b.agentCall = async (method, path, key, body) => {
    const res = await fetch(b.base + path, {
      method,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return res.json();
  };

  b.screenshot = async (name) => {
    await b.page.screenshot({ path: `${ARTIFACTS}/${name}.png`, fullPage: true });
  };

  b.stop = async () => {
    await server?.stop(true);
  };

  b.restart = async (between) => {
    const port = server!.server!.port!;
    await server!.stop(true);
    await between?.();
    listen(port);
  };
  return b;
}

// The page's globals, for code that runs in the page (page.evaluate): the project's types have no
// DOM, so they are spelled out here. Such code reaches them as `globalThis as unknown as PageGlobals`.
export type PageGlobals = {
  document: {
    querySelector(selector: string): any;
    querySelectorAll(selector: string): any[];
    scrollingElement: { scrollWidth: number; clientWidth: number };
  };
  getComputedStyle(element: unknown, pseudo?: string): { content: string };
  MutationObserver: new (callback: () => void) => { observe(target: unknown, options: Record<string, boolean>): void };
  [name: string]: any;
};

// How wide the page's content is, and how wide its window: equal when nothing scrolls sideways.
export const pageWidths = (page: Page) =>
  page.evaluate(() => {
    const { scrollWidth, clientWidth } = (globalThis as unknown as PageGlobals).document.scrollingElement;
    return [scrollWidth, clientWidth];
  });

// Waits until `selector` matches exactly `count` elements. (A string predicate would be evaluated
// by the page, which its Content-Security-Policy forbids.)
export const untilCount = (page: Page, selector: string, count: number) =>
  page.waitForFunction(
    ([s, n]) => (globalThis as unknown as PageGlobals).document.querySelectorAll(s as string).length === n,
    [selector, count] as const,
  );

// axe-core, the accessibility engine, run in the page; it reports what breaks the WCAG rules it
// can check (heading order, names, contrast, landmarks …).
export async function axeViolations(page: Page): Promise<string[]> {
  if (!(await page.evaluate(() => 'axe' in globalThis))) await page.evaluate(await Bun.file(require.resolve('axe-core/axe.min.js')).text());
  return page.evaluate(async () => {
    const axe = (globalThis as unknown as PageGlobals).axe;
    const result = await axe.run((globalThis as unknown as PageGlobals).document, { resultTypes: ['violations'] });
    return (result.violations as { id: string; nodes: { target: string[] }[] }[]).map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
  });
}
