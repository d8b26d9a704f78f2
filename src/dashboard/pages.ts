import { Elysia } from 'elysia';
import type { Sql } from '../db/connect';
import { sessionPerson } from '../domain/people';
import { refuseAgentKeys, sessionToken } from './guard';
import agentsHtml from './web/agents.html' with { type: 'text' };
import css from './web/dashboard.css' with { type: 'text' };
import script from './web/dashboard.js' with { type: 'text' };
import deliveriesHtml from './web/deliveries.html' with { type: 'text' };
import layoutHtml from './web/layout.html' with { type: 'text' };
import signInHtml from './web/sign-in.html' with { type: 'text' };
import threadsHtml from './web/threads.html' with { type: 'text' };

// The pages are plain HTML, CSS and one script, embedded as text so that the compiled executable
// serves them with no build step and nothing fetched from elsewhere. (Bun's types describe an
// .html import as a bundle; imported as text it is the file's text.)
const text = (imported: unknown) => imported as string;
const layout = text(layoutHtml);
const sections = [
  { page: 'deliveries', title: 'Deliveries', main: text(deliveriesHtml) },
  { page: 'threads', title: 'Threads', main: text(threadsHtml) },
  { page: 'agents', title: 'Agents', main: text(agentsHtml) },
] as const;

const escape = (text: string) => text.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);

function render(page: string, title: string, main: string, signedIn: boolean): string {
  const nav = signedIn
    ? sections
        .map((s) => `<a href="/dashboard/${s.page}"${s.page === page ? ' aria-current="page"' : ''}>${s.title}</a>`)
        .join('')
    : '';
  return layout
    .replaceAll('{{page}}', page)
    .replaceAll('{{title}}', escape(title))
    .replace('{{nav}}', nav)
    .replace('{{main}}', main);
}

const rendered = new Map<string, string>([
  ['sign-in', render('sign-in', 'Sign in', text(signInHtml), false)],
  ...sections.map((s) => [s.page, render(s.page, s.title, s.main, true)] as [string, string]),
]);

// Scripts and styles only from this server; no framing, no inline code.
const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
};

const html = (body: string) =>
  new Response(body, { headers: { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store', ...SECURITY_HEADERS } });
const asset = (body: string, type: string) =>
  new Response(body, { headers: { 'content-type': `${type}; charset=utf-8`, 'cache-control': 'no-cache', ...SECURITY_HEADERS } });
const redirect = (to: string) => new Response(null, { status: 303, headers: { location: to } });

export const dashboardPages = (sql: Sql) => {
  const app = new Elysia({ name: 'dashboard-pages', prefix: '/dashboard' })
    // Agent keys are refused on every dashboard route, pages included (contract §5: 401).
    .onBeforeHandle(({ request }) => refuseAgentKeys(request))
    .get('', () => redirect('/dashboard/deliveries'))
    .get('/', () => redirect('/dashboard/deliveries'))
    .get('/sign-in', () => html(rendered.get('sign-in')!))
    .get('/assets/dashboard.css', () => asset(css, 'text/css'))
    .get('/assets/dashboard.js', () => asset(script, 'text/javascript'));
  for (const { page } of sections) {
    app.get(`/${page}`, async ({ request }) =>
      (await sessionPerson(sql, sessionToken(request))) ? html(rendered.get(page)!) : redirect('/dashboard/sign-in'),
    );
  }
  return app;
};
