import { createHash } from 'node:crypto';
import { Elysia } from 'elysia';
import type { Sql } from '../db/connect';
import { sessionPerson } from '../domain/people/people';
import { redeemHoldLink } from '../domain/messages/hold-links';
import { refuseAgentKeys, sessionToken } from '../web/person-session';
import htmModule from '../../node_modules/htm/dist/htm.module.js' with { type: 'text' };
import preactModule from '../../node_modules/preact/dist/preact.module.js' with { type: 'text' };
import hooksModule from '../../node_modules/preact/hooks/dist/hooks.module.js' with { type: 'text' };
import uplotCss from '../../node_modules/uplot/dist/uPlot.min.css' with { type: 'text' };
import uplotModule from '../../node_modules/uplot/dist/uPlot.esm.js' with { type: 'text' };
import agentsHtml from './web/agents.html' with { type: 'text' };
import auditHtml from './web/audit.html' with { type: 'text' };
import authorizeHtml from './web/authorize.html' with { type: 'text' };
import css from './web/dashboard.css' with { type: 'text' };
import favicon from './web/favicon.svg' with { type: 'text' };
import deliveriesHtml from './web/deliveries.html' with { type: 'text' };
import layoutHtml from './web/layout.html' with { type: 'text' };
import notificationsHtml from './web/notifications.html' with { type: 'text' };
import overviewHtml from './web/overview.html' with { type: 'text' };
import signInHtml from './web/sign-in.html' with { type: 'text' };
import threadHtml from './web/thread.html' with { type: 'text' };
import threadsHtml from './web/threads.html' with { type: 'text' };
import { escapeHtml } from '../web/html';
import { pageHeaders } from '../web/page-headers';
import { bundleScript } from './script';

// The pages are plain HTML, CSS and one script module, embedded so that the compiled executable
// serves them with no build step and nothing fetched from elsewhere. (Bun's types describe an .html
// import as a bundle; imported as text it is the file's text.) The script is bundled from the typed
// modules of web/ when it is first asked for (script.ts); it draws with Preact and htm, and its
// charts with uPlot, pinned in package.json and served from here under their versions.
const text = (imported: unknown) => imported as string;

export const VENDORED = { preact: '10.29.8', htm: '3.1.1', uplot: '1.6.32' } as const;
const vendored = {
  [`preact-${VENDORED.preact}.js`]: text(preactModule),
  [`preact-hooks-${VENDORED.preact}.js`]: text(hooksModule),
  [`htm-${VENDORED.htm}.js`]: text(htmModule),
  [`uplot-${VENDORED.uplot}.js`]: text(uplotModule),
};
// uPlot's own stylesheet (its legend, cursor and axes), linked only by the pages that draw charts:
// the others are spared a request, and a page without a chart keeps its rules out of its cascade.
const UPLOT_CSS = `uplot-${VENDORED.uplot}.css`;
const CHART_PAGES = new Set(['overview']);
// The one inline script: it tells the browser where the bare names the modules import live. Its
// hash is in the Content-Security-Policy, so nothing else inline can run.
const imports = {
  preact: `/dashboard/assets/preact-${VENDORED.preact}.js`,
  'preact/hooks': `/dashboard/assets/preact-hooks-${VENDORED.preact}.js`,
  htm: `/dashboard/assets/htm-${VENDORED.htm}.js`,
  uplot: `/dashboard/assets/uplot-${VENDORED.uplot}.js`,
};
const IMPORT_MAP = JSON.stringify({ imports });
const importMapHash = createHash('sha256').update(IMPORT_MAP).digest('base64');
// Bundled when a browser first asks for it, not at start: a process that serves only agents never
// loads the bundler (it held 10 MB more and answered 10 000 held waits a fifth slower).
let script: Promise<string> | undefined;
const dashboardScript = () => (script ??= bundleScript(Object.keys(imports)));

const layout = text(layoutHtml).replace('{{importMap}}', IMPORT_MAP);
const sections = [
  { page: 'overview', title: 'Overview', main: text(overviewHtml) },
  { page: 'deliveries', title: 'Deliveries', main: text(deliveriesHtml) },
  { page: 'threads', title: 'Threads', main: text(threadsHtml) },
  { page: 'agents', title: 'Agents', main: text(agentsHtml) },
  { page: 'audit', title: 'Audit', main: text(auditHtml) },
  { page: 'notifications', title: 'Notifications', main: text(notificationsHtml) },
] as const;

function render(page: string, section: string, title: string, main: string, signedIn: boolean): string {
  const nav = signedIn
    ? sections
        .map((s) => `<a href="/dashboard/${s.page}"${s.page === section ? ' aria-current="page"' : ''}>${s.title}</a>`)
        .join('')
    : '';
  return layout
    .replaceAll('{{page}}', page)
    .replaceAll('{{title}}', escapeHtml(title))
    .replace('{{styles}}', CHART_PAGES.has(page) ? `<link rel="stylesheet" href="/dashboard/assets/${UPLOT_CSS}">\n` : '')
    .replace('{{nav}}', nav)
    .replace('{{main}}', main);
}

const rendered = new Map<string, string>([
  ['sign-in', render('sign-in', '', 'Sign in', text(signInHtml), false)],
  ['thread', render('thread', 'threads', 'Thread', text(threadHtml), true)],
  ['authorize', render('authorize', '', 'Connect a client', text(authorizeHtml), true)],
  ...sections.map((s) => [s.page, render(s.page, s.page, s.title, s.main, true)] as [string, string]),
]);

// Scripts and styles only from this server (and the import map above); no framing, no eval.
export const SECURITY_HEADERS = pageHeaders({ scriptHashes: [importMapHash] });

const html = (body: string) =>
  new Response(body, { headers: { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store', ...SECURITY_HEADERS } });
const asset = (body: string, type: string, cache = 'no-cache') =>
  new Response(body, { headers: { 'content-type': `${type}; charset=utf-8`, 'cache-control': cache, ...SECURITY_HEADERS } });
const redirect = (to: string) => new Response(null, { status: 303, headers: { location: to } });

// Without a session a page sends the person to sign in, and back to it afterwards.
async function page(sql: Sql, request: Request, name: string) {
  if (await sessionPerson(sql, sessionToken(request))) return html(rendered.get(name)!);
  const url = new URL(request.url);
  return redirect(`/dashboard/sign-in?next=${encodeURIComponent(url.pathname + url.search)}`);
}

export const dashboardPages = (sql: Sql) => {
  const app = new Elysia({ name: 'dashboard-pages', prefix: '/dashboard' })
    // Agent keys are refused on every dashboard route, pages included (contract §5: 401).
    .onBeforeHandle(({ request }) => refuseAgentKeys(request))
    .get('', () => redirect('/dashboard/overview'))
    .get('/', () => redirect('/dashboard/overview'))
    .get('/sign-in', () => html(rendered.get('sign-in')!))
    .get('/assets/dashboard.css', () => asset(css, 'text/css'))
    .get('/assets/favicon.svg', () => asset(favicon, 'image/svg+xml'))
    .get('/assets/dashboard.js', async () => asset(await dashboardScript(), 'text/javascript'))
    .get('/threads/:threadId', ({ request }) => page(sql, request, 'thread'))
    // A one-time link from an email about held messages: spent once signed in, it opens that
    // message's decision on the Overview; spent or dead, the Overview says so above the list.
    .get('/holds/link/:token', async ({ request, params }) => {
      const person = await sessionPerson(sql, sessionToken(request));
      if (!person) return redirect(`/dashboard/sign-in?next=${encodeURIComponent(new URL(request.url).pathname)}`);
      const messageId = await redeemHoldLink(sql, person, params.token);
      return redirect(messageId ? `/dashboard/overview#hold-${messageId}` : '/dashboard/overview?link=spent');
    })
    // An MCP client's authorization request, decided by a person (src/oauth/consent.ts).
    .get('/authorize/:uid', ({ request }) => page(sql, request, 'authorize'));
  // The version is in the name, so a cached copy is never stale.
  for (const [name, body] of Object.entries(vendored)) {
    app.get(`/assets/${name}`, () => asset(body, 'text/javascript', 'public, max-age=31536000, immutable'));
  }
  app.get(`/assets/${UPLOT_CSS}`, () => asset(uplotCss, 'text/css', 'public, max-age=31536000, immutable'));
  for (const { page: name } of sections) app.get(`/${name}`, ({ request }) => page(sql, request, name));
  return app;
};
