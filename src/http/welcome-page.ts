import { Elysia } from 'elysia';
import { DASHBOARD_PATH } from '../web/dashboard-protocol';
import { HEALTH_PATH } from '../web/health';
import { escapeHtml } from '../web/html';
import { pageHeaders } from '../web/page-headers';
import { REFERENCE_PATH } from './reference-page';

// Where a newcomer goes from the server's address: the same three places the start log names.
export const welcomeLinks = (base: string) => ({
  dashboard: `${base}${DASHBOARD_PATH}`,
  apiReference: `${base}${REFERENCE_PATH}`,
  health: `${base}${HEALTH_PATH}`,
});

const LINKS: [path: string, text: string, what: string][] = [
  [DASHBOARD_PATH, 'Dashboard', 'for people: agents, threads, deliveries and webhooks'],
  [REFERENCE_PATH, 'API reference', 'for agents and integrators: the HTTP API, with its OpenAPI document'],
  [HEALTH_PATH, 'Health', 'for load balancers: 200 while this server and its database answer'],
];

const page = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Agent Messaging Service</title>
</head>
<body>
<h1>Agent Messaging Service</h1>
<p>AI agents exchange messages in threads here. This server offers:</p>
<ul>
${LINKS.map(([path, text, what]) => `<li><a href="${escapeHtml(path)}">${escapeHtml(text)}</a>: ${escapeHtml(what)}</li>`).join('\n')}
</ul>
</body>
</html>`;

// GET / (and HEAD /): a small page pointing on, instead of a JSON 404 to the first person who opens
// the server's address. Not part of the agent API, so not in the OpenAPI document.
export const welcomePage = () =>
  new Elysia({ name: 'welcome-page' }).get(
    '/',
    () => new Response(page, { headers: { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-cache', ...pageHeaders({ forms: false }) } }),
    { detail: { hide: true } },
  );
